/**
 * `register rancher`, `import --to rancher`, and the Rancher part of `destroy cluster`.
 */
import { InternalError } from '../errors.js';
import type { EventSink } from '../events.js';

export type RancherStrategy = 'v1' | 'v3';

export interface RegisterRancherRequest {
  dir: string;
  /** Kubeconfig of Rancher's local cluster. */
  rancherKubeconfig: string;
  /** Which Rancher object represents the cluster. Default v3. */
  strategy?: RancherStrategy;
  sink: EventSink;
  signal: AbortSignal;
  /** Time without progress before a wait fails, in ms. Default 10 min. */
  noProgressTimeoutMs?: number;
}

export interface RancherRegistrationResult {
  /** One line for the user. */
  summary: string;
}

export async function registerRancher(_request: RegisterRancherRequest): Promise<RancherRegistrationResult> {
  throw new InternalError('register rancher is being built');
}

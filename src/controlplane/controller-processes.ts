/**
 * Which controller processes a control plane runs: one per bundled binary, however many
 * providers it serves. The bundle's capi-manager serves the core, kubeadm and development
 * providers in one process (docs/architecture.md, "Footprint"), and runs those named by
 * its --providers flag.
 */
import { InternalError } from '../errors.js';
import type { ArgValue } from '../process/args.js';
import type { ProviderSpec } from './local-controlplane.js';

/** One controller process and what it serves, the settings of its providers merged. */
export interface ControllerProcess {
  /** The binary's name: the process, log, certificate and port names. */
  name: string;
  binaryPath?: string;
  /** The providers it serves, by clusterctl name, in the order given. */
  providers: string[];
  featureGates: Record<string, boolean>;
  args: Record<string, ArgValue>;
  env: Record<string, string>;
}

/**
 * Groups the providers by the controller that serves them. A binary that serves several
 * (ProviderSpec.selectsProviders) is told which through --providers; feature gates, flags and
 * environment are merged, and two providers asking one process for different values is a
 * mistake in the platforms' declarations.
 */
export function controllerProcesses(providers: readonly ProviderSpec[]): ControllerProcess[] {
  const byName = new Map<string, ControllerProcess & { selectsProviders: boolean }>();
  for (const spec of providers) {
    if (!spec.controller) continue;
    let process = byName.get(spec.controller);
    if (!process) {
      process = { name: spec.controller, providers: [], featureGates: {}, args: {}, env: {}, selectsProviders: false, ...(spec.binaryPath ? { binaryPath: spec.binaryPath } : {}) };
      byName.set(spec.controller, process);
    }
    process.providers.push(spec.provider);
    process.selectsProviders ||= spec.selectsProviders ?? false;
    merge(process.featureGates, spec.featureGates ?? {}, `${spec.controller}: feature gate `, spec.provider);
    merge(process.args, spec.args ?? {}, `${spec.controller}: flag --`, spec.provider);
    merge(process.env, spec.env ?? {}, `${spec.controller}: environment variable `, spec.provider);
  }
  return [...byName.values()].map(({ selectsProviders, ...process }) =>
    selectsProviders ? { ...process, args: { ...process.args, providers: process.providers.join(',') } } : process,
  );
}

function merge<T>(into: Record<string, T>, from: Readonly<Record<string, T>>, what: string, provider: string): void {
  for (const [key, value] of Object.entries(from)) {
    if (key in into && into[key] !== value) {
      throw new InternalError(`${what}${key}: ${provider} needs ${String(value)}, another provider of the same process ${String(into[key])}`);
    }
    into[key] = value;
  }
}

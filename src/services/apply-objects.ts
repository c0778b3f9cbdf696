/**
 * The applies of `create cluster`, by stage, and the preflight dry-run. Server-side
 * apply with our field manager, bounded parallelism and retries on transient errors
 * (controlplane/install.ts `applyAll`); ordering within a stage follows the manifests'
 * file order by kind rank.
 */
import { applyAll } from '../controlplane/install.js';
import type { FieldProblem } from '../errors.js';
import { log, type EventSink } from '../events.js';
import { KubeApiError, describeRef, type KubeClient, type KubeObject } from '../kube/client.js';

export interface ApplyRequest {
  sink: EventSink;
  signal: AbortSignal;
}

export async function applyObjects(client: KubeClient, objects: readonly KubeObject[], request: ApplyRequest): Promise<number> {
  // Namespaces before what lives in them.
  await applyAll(client, objects.filter((o) => o.kind === 'Namespace'), request.signal);
  await applyAll(client, objects.filter((o) => o.kind !== 'Namespace'), request.signal);
  log(request.sink, 'debug', `applied ${objects.length} objects`);
  return objects.length;
}

/**
 * Validates every object against the real schemas and webhooks with a server-side
 * dry-run. Namespaces are created for real first (a dry-run of an object in a missing
 * namespace fails, and an empty namespace is harmless). Returns one problem per refusal.
 */
export async function dryRunObjects(client: KubeClient, objects: readonly KubeObject[], request: ApplyRequest): Promise<FieldProblem[]> {
  await applyAll(client, objects.filter((o) => o.kind === 'Namespace'), request.signal);
  const problems: FieldProblem[] = [];
  for (const obj of objects.filter((o) => o.kind !== 'Namespace')) {
    request.signal.throwIfAborted();
    try {
      await client.apply(obj, { dryRun: true });
    } catch (error) {
      if (error instanceof KubeApiError && (error.statusCode === 422 || error.statusCode === 400 || error.statusCode === 403)) {
        problems.push({ path: describeRef(obj), message: error.message.replace(`${describeRef(obj)}: `, '') });
      } else throw error;
    }
  }
  return problems;
}

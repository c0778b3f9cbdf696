/**
 * Before a move into the install's own cluster: both API servers answer every readiness probe
 * for a while in a row, as Cluster API's self-hosted e2e checks both clusters before its move.
 * A cluster made minutes ago may still restart its API server (kubeadm's static pods settling,
 * the pod network arriving), and a move that meets one of those restarts half-way fails.
 */
import { ExternalError, messageOf } from '../errors.js';
import type { KubeClient } from '../kube/client.js';
import { polling, until } from '../progress/until.js';

/** How long both servers must answer in a row before the move into the cluster itself: 5 s, Cluster API's self-hosted test's figure. */
export const selfMoveSteadyMs = 5_000;

/** Time between two probes of each server: 250 ms. */
const probeIntervalMs = 250;

/** How long the check may take in all before it fails (a server down, or one that keeps flapping): 2 minutes. */
const steadyTimeoutMs = 120_000;

export interface SteadyServer {
  /** What the user calls it, e.g. `the local control plane`. */
  name: string;
  client: KubeClient;
}

/**
 * Resolves once every server answered `/readyz` on each probe for `steadyMs` in a row (no retry
 * hides a 503); a failed probe starts the window again. Fails naming the server and its last
 * answer when the window did not fill within `timeoutMs` (default 2 minutes): a server that does
 * not answer, or one that keeps flapping.
 */
export async function untilSteady(servers: readonly SteadyServer[], options: { steadyMs: number; signal?: AbortSignal; timeoutMs?: number }): Promise<number> {
  const timeoutMs = options.timeoutMs ?? steadyTimeoutMs;
  const started = Date.now();
  let steadySince: number | undefined;
  let lastFailure = '';
  const failure = (seen: string) =>
    new ExternalError(`The API servers did not answer steadily for ${Number((options.steadyMs / 1000).toFixed(1))} s within ${Number((timeoutMs / 1000).toFixed(1))} s before the move (last failed probe: ${seen || 'none'})`, {
      hint: 'Check the cluster (`kubectl --kubeconfig auth/kubeconfig get --raw \'/readyz?verbose\'`) and run the same command again: the move has not begun.',
    });
  return until(
    polling(async () => {
      const failing: string[] = [];
      await Promise.all(
        servers.map(async (server) => {
          try {
            await server.client.probe('/readyz');
          } catch (error) {
            failing.push(`${server.name}: ${messageOf(error)}`);
          }
        }),
      );
      const now = Date.now();
      if (failing.length > 0) {
        steadySince = undefined;
        lastFailure = failing.sort().join('; ');
      } else steadySince ??= now;
      const steadyFor = steadySince === undefined ? 0 : now - steadySince;
      const progress = failing.length > 0 ? `not answering: ${lastFailure}` : 'every server answers';
      if (steadyFor >= options.steadyMs) return { state: 'done', value: steadyFor, progress };
      if (now - started >= timeoutMs) return { state: 'failed', value: steadyFor, progress, error: failure(lastFailure) };
      return { state: 'waiting', value: steadyFor, progress };
    }, probeIntervalMs),
    {
      what: `${servers.map((s) => s.name).join(' and ')} to answer steadily`,
      // The look itself fails the check at timeoutMs; this only catches looks that stop coming.
      noProgressTimeoutMs: timeoutMs + 30_000,
      onStall: () => failure(lastFailure),
      ...(options.signal ? { signal: options.signal } : {}),
    },
  );
}

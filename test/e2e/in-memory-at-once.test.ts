/**
 * Two in-memory clusters created at once, each by its own `create cluster` (so two local
 * control planes, two in-memory providers, each serving workload API servers from the same
 * port range): both exit 0, each workload API is on a port of its own, and each lists its
 * node Ready. The in-memory provider picks a cluster's port when its DevCluster is first
 * reconciled and listens on it only when the first API server is added, seconds later; the
 * bundle's patch holds the port from the pick to the listen (scripts/bundle/patches.ts), so
 * the second provider can never pick the port the first one is about to serve. Without it the
 * two picks land on the same free port and one cluster never gets a node.
 *
 * Fails (never skips) without the bundle: the CLI exits 4 and the kubectl lookup throws.
 */
import { readFile, rm } from 'node:fs/promises';
import path from 'node:path';
import { parse } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { killRecorded } from '../integration/support/controlplane.js';
import { cli, ensureBuilt, getNodes, kubectl, type CliRun } from './support/cli.js';
import { step } from './support/steps.js';
import { runTempDir } from '../support/run-dirs.js';

/** Longest two `create cluster` of 1 + 0 at once may take on a loaded 2-core machine. */
const createTimeoutMs = 900_000;
const destroyTimeoutMs = 300_000;
const names = ['once-a', 'once-b'] as const;

const dirs: string[] = [];

beforeAll(async () => {
  await ensureBuilt();
  for (const name of names) dirs.push(await runTempDir(`e2e-${name}`));
});

afterAll(async () => {
  await Promise.all(
    dirs.map(async (dir) => {
      await cli(['destroy', 'cluster', '--dir', dir], destroyTimeoutMs).catch(() => undefined);
      await killRecorded(dir).catch(() => undefined);
      await rm(dir, { recursive: true, force: true });
    }),
  );
});

/** The workload API's port a cluster's auth/kubeconfig names. */
async function apiPort(dir: string): Promise<number> {
  const config = parse(await readFile(path.join(dir, 'auth', 'kubeconfig'), 'utf8')) as { clusters: { cluster: { server: string } }[] };
  return Number(new URL(config.clusters[0]!.cluster.server).port);
}

describe('two in-memory clusters created at once (1 + 0 each)', () => {
  const createBoth = step(async (): Promise<CliRun[]> => {
    await kubectl(); // throws with the bundle hint when the bundle is missing
    for (const [i, name] of names.entries()) {
      const config = await cli(['create', 'install-config', '--dir', dirs[i]!, '--name', name, '--control-plane-replicas', '1', '--workers', '0'], 60_000);
      expect(config.exitCode, config.stderr).toBe(0);
    }
    const runs = await Promise.all(dirs.map((dir) => cli(['create', 'cluster', '--dir', dir, '--no-progress-timeout', '5'], createTimeoutMs)));
    process.stderr.write(`e2e in-memory-at-once: the two creates took ${runs.map((r) => `${Math.round(r.durationMs / 1000)} s`).join(' and ')}\n`);
    return runs;
  });

  it('both creates exit 0, each workload API server on a port of its own', async () => {
    const runs = await createBoth();
    for (const [i, run] of runs.entries()) expect(run.exitCode, `${names[i]}:\n${run.stderr.slice(-4000)}`).toBe(0);
    const ports = await Promise.all(dirs.map(apiPort));
    expect(new Set(ports).size, `ports: ${ports.join(', ')}`).toBe(2);
  });

  it('each cluster lists its one node Ready through its own auth/kubeconfig', async () => {
    const runs = await createBoth();
    for (const [i, dir] of dirs.entries()) {
      expect(runs[i]!.exitCode, `${names[i]}:\n${runs[i]!.stderr.slice(-4000)}`).toBe(0);
      const nodes = await getNodes(path.join(dir, 'auth', 'kubeconfig'));
      expect(nodes.map((n) => n.ready), `${names[i]}'s nodes`).toEqual([true]);
    }
  });
});

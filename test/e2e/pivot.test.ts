/**
 * The pivot acceptance, as a user runs it with `node bin/provisioner.js` and the real
 * bundled binaries: `management start --dir M` (a lasting management cluster), then
 * `create cluster --dir D --pivot-to M/auth/management.kubeconfig` on the in-memory
 * platform (3 control-plane + 2 workers). The first create is killed with SIGKILL at a named
 * phase of the move (`killPhase`: as soon as the move's journal records it, so the kill lands
 * in the copy that follows); the second always resumes it, and every object the move recorded
 * is then in M once. Afterwards D's local control plane is gone, the cluster is Available and managed from
 * M — M's in-memory provider serves the workload API that D's used to — and scaling the
 * MachineDeployment in M brings a new machine and node. `wait-for install-complete` asks M
 * (the stopped local control plane stays stopped), and so it does in a second install dir
 * created with `--management-kubeconfig M` for the same cluster, which has no local control
 * plane at all. `destroy cluster` then deletes it from M. Fails (never skips) without the bundle.
 */
import { copyFile, mkdir, readFile, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { phaseIndex, type JournalObject, type PivotJournal, type PivotPhase } from '../../src/pivot/journal.js';
import { sourceUidAnnotation } from '../../src/pivot/move.js';
import { aliveRecorded, killRecorded, waitFor } from '../integration/support/controlplane.js';
import { cli, ensureBuilt, getNodes, kubectl, processesMentioning, readJournal, startCli, type BackgroundCli, type CliRun } from './support/cli.js';
import { runTempDir } from '../support/run-dirs.js';
import { step } from './support/steps.js';

const createTimeoutMs = 900_000;
const stallMinutes = '5';
const commandTimeoutMs = 300_000;
/**
 * Where the first create is killed: right after the move journals the pause. The journal says
 * `paused` until the copy that follows is done (hundreds of requests' worth), so a kill the
 * moment it shows lands in the copy: copies made, some not yet journaled, the source paused.
 */
const killPhase: PivotPhase = 'paused';

let base = '';
let mgmt = '';
let dir = '';
/** A second install dir of the same cluster, created with --management-kubeconfig M. */
let second = '';
let background: BackgroundCli | undefined;
/** `management start --dir M`, run once before the tests: the management cluster every test here uses. */
let managementStart: CliRun | undefined;

const mgmtKubeconfig = () => path.join(mgmt, 'auth', 'management.kubeconfig');

/** `kubectl --kubeconfig M ...` with JSON output, parsed. */
async function inManagement<T>(...args: string[]): Promise<T> {
  const run = await execa(await kubectl(), ['--kubeconfig', mgmtKubeconfig(), ...args, '-o', 'json', '--request-timeout=30s'], { reject: false, timeout: 60_000 });
  if (run.exitCode !== 0) throw new Error(`kubectl ${args.join(' ')} exited ${run.exitCode}: ${run.stderr}`);
  return JSON.parse(run.stdout) as T;
}

interface Listed {
  items: { metadata: { name: string }; status?: { phase?: string; nodeRef?: { name: string }; conditions?: { type: string; status: string }[] } }[];
}

async function readPivot(): Promise<PivotJournal | undefined> {
  try {
    return JSON.parse(await readFile(path.join(dir, '.provisioner', 'pivot.json'), 'utf8')) as PivotJournal;
  } catch {
    return undefined;
  }
}

/**
 * SIGKILLs `run` as soon as the move's journal records `phase` (or a later one), polled every
 * 5 ms: far shorter than any phase's work. Returns the phase the journal holds after the kill.
 */
async function killWhenJournaled(run: BackgroundCli, phase: PivotPhase, timeoutMs: number): Promise<PivotPhase | undefined> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const journaled = (await readPivot())?.phase;
    if (journaled !== undefined && phaseIndex(journaled) >= phaseIndex(phase)) break;
    if (run.ended()) throw new Error(`the create ended before its move journaled ${phase}:\n${run.stderr()}`);
    if (Date.now() > deadline) throw new Error(`the move did not journal ${phase} within ${timeoutMs} ms (journal: ${journaled ?? 'none'})`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  run.child.kill('SIGKILL');
  expect((await run.result()).signal).toBe('SIGKILL');
  return (await readPivot())?.phase;
}

/**
 * Nothing duplicated or lost: each object the move recorded is in M with the target UID
 * recorded, and every copy in M (an object carrying a source UID) is a recorded one. Not the
 * reverse: M's controllers may rewrite a copy's annotations (the bootstrap data Secrets'), and
 * the objects they make themselves carry no source UID.
 */
async function expectEachMovedOnce(journal: PivotJournal): Promise<void> {
  /** By `kind.group namespace`: kubectl's name for the kind, and the recorded objects. */
  const kinds = new Map<string, { resource: string; namespace: string; moved: JournalObject[] }>();
  for (const entry of journal.objects.filter((o) => !o.global)) {
    const group = entry.apiVersion.includes('/') ? entry.apiVersion.split('/')[0] : '';
    const resource = group ? `${entry.kind}.${group}` : entry.kind;
    const kind = kinds.get(`${resource} ${entry.namespace}`) ?? { resource, namespace: entry.namespace!, moved: [] };
    kind.moved.push(entry);
    kinds.set(`${resource} ${entry.namespace}`, kind);
  }
  expect(kinds.size).toBeGreaterThan(0);
  for (const { resource, namespace, moved } of kinds.values()) {
    const listed = await inManagement<{ items: { metadata: { name: string; uid: string; annotations?: Record<string, string> } }[] }>('get', resource, '-n', namespace);
    const uidOf = new Map(listed.items.map((o) => [o.metadata.name, o.metadata.uid]));
    expect(moved.filter((e) => uidOf.get(e.name) !== e.targetUid).map((e) => e.name), `${resource}: recorded but not in M as copied`).toEqual([]);
    const recorded = new Set(moved.map((e) => e.name));
    const unrecorded = listed.items.filter((o) => o.metadata.annotations?.[sourceUidAnnotation] && !recorded.has(o.metadata.name));
    expect(unrecorded.map((o) => o.metadata.name), `${resource}: copies the move did not record`).toEqual([]);
  }
}

beforeAll(async () => {
  await ensureBuilt();
  await kubectl(); // throws with the bundle hint, at once, when the bundle is missing
  base = await runTempDir('e2e-pivot');
  mgmt = path.join(base, 'M');
  dir = path.join(base, 'D');
  second = path.join(base, 'D2');
  managementStart = await cli(['management', 'start', '--dir', mgmt], commandTimeoutMs);
});

afterAll(async () => {
  if (background && !background.ended()) background.child.kill('SIGKILL');
  if (dir) await killRecorded(dir).catch(() => undefined);
  if (mgmt) {
    const stop = await cli(['management', 'stop', '--dir', mgmt], commandTimeoutMs).catch(() => undefined);
    if (stop?.exitCode !== 0) process.stderr.write(`cleanup: management stop exited ${stop?.exitCode}: ${stop?.stderr}\n`);
    await killRecorded(mgmt).catch(() => undefined);
  }
  if (base) await rm(base, { recursive: true, force: true });
});

describe(`acceptance: management start, create cluster --pivot-to (3 + 2), SIGKILL at the move's \`${killPhase}\`, resume, scale from the management cluster`, () => {
  // The steps the tests stand on (step(): at most once per file), so each test also passes alone.
  /** The first create, SIGKILLed once the move journals `killPhase`; resolves to the phase its journal holds after the kill. */
  const killedCreate = step(async () => {
    expect(managementStart?.exitCode, `management start failed:\n${managementStart?.stderr}`).toBe(0);
    const config = await cli(['create', 'install-config', '--dir', dir, '--name', 'moved', '--control-plane-replicas', '3', '--workers', '2'], 60_000);
    expect(config.exitCode, config.stderr).toBe(0);
    background = startCli(['create', 'cluster', '--dir', dir, '--no-progress-timeout', stallMinutes, '--pivot-to', mgmtKubeconfig()], createTimeoutMs);
    await background.waitForStderr(/stage pivot started/, createTimeoutMs);
    const killedAt = await killWhenJournaled(background, killPhase, 120_000);
    process.stderr.write(`e2e pivot: the first create was killed (SIGKILL) at the move's phase ${killPhase}; its journal says ${killedAt}\n`);
    return killedAt;
  });
  /** The second create, which resumes the move. */
  const resumedCreate = step(async () => {
    await killedCreate();
    return cli(['create', 'cluster', '--dir', dir, '--no-progress-timeout', stallMinutes, '--pivot-to', mgmtKubeconfig()], createTimeoutMs);
  });
  /** Each later test's precondition: the resumed create exited 0 (its stderr says why not). */
  const created = async () => {
    const run = await resumedCreate();
    expect(run.exitCode, `create cluster did not finish:\n${run.stderr.slice(-4000)}`).toBe(0);
  };

  it('management start exits 0 and prints its kubeconfig', () => {
    expect(managementStart?.exitCode, managementStart?.stderr).toBe(0);
    expect(managementStart!.stdout.trim()).toBe(mgmtKubeconfig());
  });

  it(`create cluster --pivot-to, killed with SIGKILL once the move journals \`${killPhase}\`, leaves the move's journal at \`${killPhase}\``, async () => {
    const killedAt = await killedCreate();
    expect(killedAt, `the kill landed after ${killPhase}`).toBe(killPhase);
    expect((await readJournal(dir)).stages['pivot']?.state).toBe('running');
  });

  it(`create cluster --pivot-to again resumes the move from \`${killPhase}\` and exits 0; every moved object is in the management cluster once; no process of the local control plane is left`, async () => {
    const killedAt = await killedCreate();
    const run = await resumedCreate();
    expect(run.exitCode, run.stderr).toBe(0);
    expect(run.stdout.trim()).toBe(path.join(dir, 'auth', 'kubeconfig'));
    expect(run.stderr).toContain(`An unfinished pivot (phase ${killedAt ?? killPhase}) is resumed before anything else`);
    expect(run.stderr).toContain('stage wait-pivoted succeeded');
    const journal = await readPivot();
    expect(journal?.phase).toBe('done');
    await expectEachMovedOnce(journal!);
    expect((await readJournal(dir)).completedAt).toBeDefined();
    expect((await aliveRecorded(dir)).map((e) => e.name)).toEqual([]);
    expect(await processesMentioning(dir)).toEqual([]);
  });

  it('the cluster is Available in the management cluster, with 5 Running machines, and its 5 nodes are Ready through auth/kubeconfig', async () => {
    await created();
    const cluster = await inManagement<Listed['items'][number]>('get', 'cluster', 'moved', '-n', 'moved');
    expect(cluster.status?.conditions?.find((c) => c.type === 'Available')?.status).toBe('True');
    const machines = await inManagement<Listed>('get', 'machines', '-n', 'moved');
    expect(machines.items.map((m) => m.status?.phase)).toEqual(Array(5).fill('Running'));
    expect((await stat(path.join(dir, 'auth', 'kubeconfig'))).mode & 0o777).toBe(0o600);
    const nodes = await getNodes(path.join(dir, 'auth', 'kubeconfig'));
    expect(nodes.filter((n) => n.ready)).toHaveLength(5);
  });

  it('wait-for install-complete asks the management cluster the pivot recorded, leaves the stopped local control plane alone, exits 0', async () => {
    await created();
    const logSizes = async () => Promise.all(['etcd', 'kube-apiserver', 'capi-manager'].map((name) => stat(path.join(dir, 'logs', `${name}.log`)).then((s) => s.size)));
    const before = await logSizes();
    const run = await cli(['wait-for', 'install-complete', '--dir', dir, '--no-progress-timeout', stallMinutes], commandTimeoutMs);
    expect(run.exitCode, run.stderr).toBe(0);
    expect(run.stdout.trim()).toBe(path.join(dir, 'auth', 'kubeconfig'));
    expect(run.stderr).toContain(`Asking the management cluster of ${mgmtKubeconfig()}`);
    expect(run.stderr).toContain("The workload cluster's API answers with 5 Ready node(s)");
    // Nothing of the local control plane was started: not a line in its logs, no process left.
    expect(await logSizes()).toEqual(before);
    expect((await aliveRecorded(dir)).map((e) => e.name)).toEqual([]);
    expect(await processesMentioning(dir)).toEqual([]);
  });

  it('create cluster --management-kubeconfig on a second install dir of the same cluster, then wait-for install-complete there (no local control plane at all), exit 0', async () => {
    await created();
    // The same install config, so the same objects: the create finds them healthy in the management cluster.
    await mkdir(second, { recursive: true });
    await copyFile(path.join(dir, 'install-config.yaml'), path.join(second, 'install-config.yaml'));
    const create = await cli(['create', 'cluster', '--dir', second, '--no-progress-timeout', stallMinutes, '--management-kubeconfig', mgmtKubeconfig()], createTimeoutMs);
    expect(create.exitCode, create.stderr).toBe(0);
    await expect(stat(path.join(second, '.provisioner', 'controlplane'))).rejects.toThrow();

    const run = await cli(['wait-for', 'install-complete', '--dir', second, '--no-progress-timeout', stallMinutes], commandTimeoutMs);
    expect(run.exitCode, run.stderr).toBe(0);
    expect(run.stdout.trim()).toBe(path.join(second, 'auth', 'kubeconfig'));
    expect(run.stderr).toContain(`Asking the management cluster of ${mgmtKubeconfig()}`);
    expect(run.stderr).toContain("The workload cluster's API answers with 5 Ready node(s)");
    expect(await processesMentioning(second)).toEqual([]);
    const nodes = await getNodes(path.join(second, 'auth', 'kubeconfig'));
    expect(nodes.filter((n) => n.ready)).toHaveLength(5);
  });

  it('scaling the MachineDeployment in the management cluster brings a sixth machine and node', async () => {
    await created();
    const scale = await execa(await kubectl(), ['--kubeconfig', mgmtKubeconfig(), '-n', 'moved', 'scale', 'machinedeployment', '--all', '--replicas', '3'], { reject: false });
    expect(scale.exitCode, scale.stderr).toBe(0);
    await waitFor(
      'six Running machines with nodes in the management cluster',
      async () => {
        const machines = await inManagement<Listed>('get', 'machines', '-n', 'moved');
        return machines.items.length === 6 && machines.items.every((m) => m.status?.phase === 'Running' && m.status.nodeRef);
      },
      300_000,
    );
    const nodes = await getNodes(path.join(dir, 'auth', 'kubeconfig'));
    expect(nodes.filter((n) => n.ready)).toHaveLength(6);
  });

  it('destroy cluster deletes the cluster from the management cluster; destroy bootstrap removes the stopped local control plane', async () => {
    await created();
    const destroy = await cli(['destroy', 'cluster', '--dir', dir], commandTimeoutMs);
    expect(destroy.exitCode, destroy.stderr).toBe(0);
    expect(destroy.stdout.trim()).toBe('destroyed moved/moved');
    expect((await inManagement<Listed>('get', 'clusters', '-A')).items).toEqual([]);
    const bootstrap = await cli(['destroy', 'bootstrap', '--dir', dir], commandTimeoutMs);
    expect(bootstrap.exitCode, bootstrap.stderr).toBe(0);
    await expect(stat(path.join(dir, '.provisioner', 'controlplane'))).rejects.toThrow();
    await expect(stat(path.join(dir, '.provisioner', 'pivot.json'))).rejects.toThrow();
  });
});

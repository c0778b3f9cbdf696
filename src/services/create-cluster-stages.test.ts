/**
 * `create cluster`'s declared stage list (createClusterStages), run on the real stage runner
 * and journal with bodies that record their calls: which stages each combination of flags
 * has, in which order, and what a resumed run skips or repeats.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { RecordingSink } from '../../test/support/recording-sink.js';
import { Journal } from '../lifecycle/journal.js';
import { StageRunner } from '../lifecycle/stages.js';
import { createClusterStages, type CreateClusterBodies, type CreateClusterSituation } from './create-cluster.js';

const provisioning = [
  'manifests',
  'controlplane',
  'preflight',
  'hooks/pre-provision',
  'infrastructure',
  'wait-infrastructure',
  'hooks/infra-ready',
  'hooks/bootstrap-data',
  'control-plane',
  'workers',
  'wait-cluster',
  'hooks/post-provision',
  'hand-off',
];

const plain: CreateClusterSituation = { dryRun: false, resumingPivot: false, pivot: 'none', registerRancher: false };

/** Bodies that record what ran (`name`, or `name:done` for a hook stage's `whenDone`); `failAt` throws there, as a kill would stop the run. */
function recordingBodies(ran: string[], failAt?: string): CreateClusterBodies {
  const body = (name: string) => async () => {
    ran.push(name);
    if (name === failAt) throw new Error(`killed in ${name}`);
  };
  return {
    manifests: body('manifests'),
    controlplane: body('controlplane'),
    preflight: body('preflight'),
    hooks: (_which, name) => ({ run: body(`hooks/${name}`), whenDone: async () => void ran.push(`hooks/${name}:done`) }),
    infrastructure: body('infrastructure'),
    'wait-infrastructure': body('wait-infrastructure'),
    'control-plane': body('control-plane'),
    workers: body('workers'),
    'wait-cluster': body('wait-cluster'),
    'hand-off': body('hand-off'),
    'management-install': body('management-install'),
    pivot: body('pivot'),
    'wait-pivoted': body('wait-pivoted'),
    'register-rancher': body('register-rancher'),
  };
}

describe('create cluster: the declared stage list', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'create-stages-'));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  /** One run of the list in `dir`, as `create cluster` runs it: what ran, and the stage events it announced. */
  async function run(situation: CreateClusterSituation, failAt?: string): Promise<{ ran: string[]; announced: string[] }> {
    const journal = await Journal.open(dir);
    if (!situation.dryRun) await journal.beginRun();
    const sink = new RecordingSink();
    const ran: string[] = [];
    const runner = new StageRunner({ journal, sink, signal: new AbortController().signal, dryRun: situation.dryRun });
    const done = runner.runAll(createClusterStages(situation, recordingBodies(ran, failAt)));
    if (failAt) await expect(done).rejects.toThrow(`killed in ${failAt}`);
    else await done;
    return { ran, announced: sink.events.flatMap((e) => (e.type === 'stage' && e.state !== 'succeeded' ? [`${e.stage}:${e.state}`] : [])) };
  }

  it.each<[string, Partial<CreateClusterSituation>, string[]]>([
    ['no flags', {}, provisioning],
    ['--pivot-to <kubeconfig>', { pivot: 'kubeconfig' }, [...provisioning, 'pivot', 'wait-pivoted']],
    ['--pivot-to self', { pivot: 'self' }, [...provisioning, 'management-install', 'pivot', 'wait-pivoted']],
    ['--register-rancher', { registerRancher: true }, [...provisioning, 'register-rancher']],
    ['--pivot-to <kubeconfig> --register-rancher', { pivot: 'kubeconfig', registerRancher: true }, [...provisioning, 'pivot', 'wait-pivoted', 'register-rancher']],
    ['--dry-run (with --pivot-to and --register-rancher, which it leaves out)', { dryRun: true, pivot: 'kubeconfig', registerRancher: true }, ['manifests', 'controlplane', 'preflight']],
    ['a resumed move into a kubeconfig', { resumingPivot: true, pivot: 'kubeconfig' }, ['manifests', 'controlplane', 'pivot', 'wait-pivoted']],
    ['a resumed move into the cluster itself', { resumingPivot: true, pivot: 'self' }, ['manifests', 'controlplane', 'management-install', 'pivot', 'wait-pivoted']],
    ['a resumed move with --register-rancher', { resumingPivot: true, pivot: 'kubeconfig', registerRancher: true }, ['manifests', 'controlplane', 'pivot', 'wait-pivoted', 'register-rancher']],
  ])('%s: these stages, in this order', async (_flags, situation, expected) => {
    const { ran, announced } = await run({ ...plain, ...situation });
    expect(ran).toEqual(expected);
    expect(announced).toEqual(expected.map((name) => `${name}:started`));
  });

  it('a run killed in the move resumes the move only: nothing is applied to its source again, no hook runs, the control plane is attached once', async () => {
    const first = await run({ ...plain, pivot: 'kubeconfig' }, 'pivot');
    expect(first.ran).toEqual([...provisioning, 'pivot']);
    // The next run finds the move's journal unfinished (createCluster: resumingPivot).
    const resumed = await run({ ...plain, pivot: 'kubeconfig', resumingPivot: true });
    expect(resumed.ran).toEqual(['manifests', 'controlplane', 'pivot', 'wait-pivoted']);
    const journal = await Journal.open(dir);
    expect([journal.stage('pivot')?.state, journal.stage('pivot')?.run, journal.stage('wait-pivoted')?.run]).toEqual(['succeeded', 2, 2]);
    // The provisioning stages keep the first run's record.
    expect([journal.stage('wait-cluster')?.run, journal.stage('hand-off')?.run]).toEqual([1, 1]);
  });

  it('a run killed in the self pivot\'s management install resumes from it, before the move', async () => {
    await run({ ...plain, pivot: 'self' }, 'management-install');
    const again = await run({ ...plain, pivot: 'self' });
    // No move journaled yet, so this is not a resumed move: the provisioning runs again, the user's hooks are not.
    expect(again.ran).toEqual([
      'manifests',
      'controlplane',
      'preflight',
      'hooks/pre-provision:done',
      'infrastructure',
      'wait-infrastructure',
      'hooks/infra-ready:done',
      'hooks/bootstrap-data:done',
      'control-plane',
      'workers',
      'wait-cluster',
      'hooks/post-provision:done',
      'hand-off',
      'management-install',
      'pivot',
      'wait-pivoted',
    ]);
    expect(again.announced.filter((s) => s.endsWith(':skipped'))).toEqual(['hooks/pre-provision:skipped', 'hooks/infra-ready:skipped', 'hooks/bootstrap-data:skipped', 'hooks/post-provision:skipped']);
  });

  it('a run killed while provisioning repeats the applies and waits, and skips the user\'s hooks an earlier run finished (the platform\'s run again)', async () => {
    await run(plain, 'wait-cluster');
    const again = await run(plain);
    expect(again.ran).toEqual([
      'manifests',
      'controlplane',
      'preflight',
      'hooks/pre-provision:done',
      'infrastructure',
      'wait-infrastructure',
      'hooks/infra-ready:done',
      'hooks/bootstrap-data:done',
      'control-plane',
      'workers',
      'wait-cluster',
      'hooks/post-provision',
      'hand-off',
    ]);
  });

  it('a dry run journals nothing', async () => {
    await run({ ...plain, dryRun: true });
    expect((await Journal.open(dir)).snapshot().stages).toEqual({});
  });
});

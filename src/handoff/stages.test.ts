/**
 * The Rancher and Fleet hand-offs' declared stage lists (rancherStages, fleetStages), run on the
 * real stage runner with bodies that record their calls and report what the real ones would
 * find: which stages run, are skipped (and why) or left out, for each situation.
 */
import { describe, expect, it } from 'vitest';
import { RecordingSink } from '../../test/support/recording-sink.js';
import { StageRunner, type Stage } from '../lifecycle/stages.js';
import { fleetStages, type FleetFindings, type FleetStageName } from './fleet/register.js';
import { rancherStages, type RancherFindings, type RancherStageName } from './rancher/register.js';

/** Runs `stages` on a runner without a journal, as the hand-offs do: what ran, and each announced stage with its state. */
async function run(stages: Stage[], ran: string[]): Promise<{ ran: string[]; announced: string[]; skipped: Record<string, string> }> {
  const sink = new RecordingSink();
  await new StageRunner({ sink, signal: new AbortController().signal }).runAll(stages);
  const announced = sink.events.flatMap((e) => (e.type === 'stage' && e.state !== 'succeeded' ? [`${e.stage}:${e.state}`] : []));
  const skipped = Object.fromEntries(sink.events.flatMap((e) => (e.type === 'stage' && e.state === 'skipped' ? [[e.stage, e.message ?? '']] : [])));
  return { ran, announced, skipped };
}

describe('rancher: the declared stage list', () => {
  /** Bodies that record what ran; preflight finds `mode`, cluster finds whether Rancher reports it Ready. */
  function rancher(mode: 'turtles' | 'import', clusterReady: boolean): { stages: Stage[]; ran: string[] } {
    const ran: string[] = [];
    const found: RancherFindings = {};
    const body = (name: RancherStageName, find?: () => void) => async () => void (ran.push(name), find?.());
    const stages = rancherStages(found, {
      preflight: body('preflight', () => (found.mode = mode)),
      label: body('label'),
      cluster: body('cluster', () => (found.clusterReady = clusterReady)),
      token: body('token'),
      manifest: body('manifest'),
      ready: body('ready'),
    });
    return { stages, ran };
  }

  it('is one fixed list of six stages', () => {
    expect(rancher('import', false).stages.map((s) => s.name)).toEqual(['rancher/preflight', 'rancher/label', 'rancher/cluster', 'rancher/token', 'rancher/manifest', 'rancher/ready']);
  });

  it.each<[string, 'turtles' | 'import', boolean, string[], string[]]>([
    ['our own import', 'import', false, ['preflight', 'cluster', 'token', 'manifest', 'ready'], ['rancher/label']],
    ['our own import of a cluster whose agent checked in already (a resume, a second run)', 'import', true, ['preflight', 'cluster', 'ready'], ['rancher/label', 'rancher/token', 'rancher/manifest']],
    ['Turtles imports it', 'turtles', false, ['preflight', 'label', 'ready'], ['rancher/cluster', 'rancher/token', 'rancher/manifest']],
  ])('%s: these stages run, the others are skipped with a reason', async (_situation, mode, ready, expected, skipped) => {
    const { stages, ran } = rancher(mode, ready);
    const result = await run(stages, ran);
    expect(result.ran).toEqual(expected);
    expect(Object.keys(result.skipped)).toEqual(skipped);
    expect(result.announced).toEqual(stages.map((s) => `${s.name}:${skipped.includes(s.name) ? 'skipped' : 'started'}`));
  });

  it('says why a stage is skipped', async () => {
    const byTurtles = rancher('turtles', false);
    expect((await run(byTurtles.stages, byTurtles.ran)).skipped['rancher/cluster']).toBe('Rancher Turtles imports this cluster');
    const checkedIn = rancher('import', true);
    expect((await run(checkedIn.stages, checkedIn.ran)).skipped['rancher/token']).toMatch(/Ready: the agent checked in already/);
  });

  it('a failed stage stops the list: nothing after it runs', async () => {
    const { stages, ran } = rancher('import', false);
    const failing = stages.map((s) => (s.name === 'rancher/token' ? { ...s, run: async () => Promise.reject(new Error('no token')) } : s));
    await expect(run(failing, ran)).rejects.toThrow('no token');
    expect(ran).toEqual(['preflight', 'cluster']);
  });
});

describe('fleet: the declared stage list', () => {
  function fleet(mode: 'manager' | 'agent', agentCheckedIn: boolean): { stages: Stage[]; ran: string[] } {
    const ran: string[] = [];
    const found: FleetFindings = {};
    const body = (name: FleetStageName, find?: () => void) => async () => void (ran.push(name), find?.());
    const stages = fleetStages(mode, found, {
      preflight: body('preflight'),
      record: body('record'),
      'kubeconfig-secret': body('kubeconfig-secret'),
      cluster: body('cluster', () => (found.agentCheckedIn = agentCheckedIn)),
      token: body('token'),
      'agent-bootstrap': body('agent-bootstrap'),
      'wait-registered': body('wait-registered'),
    });
    return { stages, ran };
  }

  it.each<[string, 'manager' | 'agent', boolean, string[], string[]]>([
    ['manager-initiated', 'manager', false, ['preflight', 'record', 'kubeconfig-secret', 'cluster', 'wait-registered'], []],
    ['manager-initiated, agent checked in already', 'manager', true, ['preflight', 'record', 'kubeconfig-secret', 'cluster', 'wait-registered'], []],
    ['agent-initiated', 'agent', false, ['preflight', 'record', 'cluster', 'token', 'agent-bootstrap', 'wait-registered'], []],
    ['agent-initiated, an agent checked in already (a second run)', 'agent', true, ['preflight', 'record', 'cluster', 'wait-registered'], ['fleet/token', 'fleet/agent-bootstrap']],
  ])('%s: these stages run; the other mode\'s are left out unannounced', async (_situation, mode, checkedIn, expected, skipped) => {
    const { stages, ran } = fleet(mode, checkedIn);
    const result = await run(stages, ran);
    expect(result.ran).toEqual(expected);
    expect(Object.keys(result.skipped)).toEqual(skipped);
    expect(result.announced).toEqual(stages.filter((s) => s.when !== false).map((s) => `${s.name}:${skipped.includes(s.name) ? 'skipped' : 'started'}`));
    for (const reason of Object.values(result.skipped)) expect(reason).toMatch(/already checked in/);
  });
});

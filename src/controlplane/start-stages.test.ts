/**
 * The local control plane's start as a declared list (controlPlaneStartStages), run on the real
 * stage runner with bodies that record their calls: which stages each start has, in order,
 * each announced and timed.
 */
import { describe, expect, it } from 'vitest';
import { RecordingSink } from '../../test/support/recording-sink.js';
import { StageRunner } from '../lifecycle/stages.js';
import { controlPlaneStartStages, type ControlPlaneStartStage } from './local-controlplane.js';

const names: ControlPlaneStartStage[] = ['pki', 'etcd', 'kube-apiserver', 'forwarder', 'crds', 'controllers', 'webhooks'];

describe('the control plane start: the declared stage list', () => {
  it.each<[string, { reconcile: boolean; listenAddress: boolean }, ControlPlaneStartStage[]]>([
    ['on loopback only', { reconcile: true, listenAddress: false }, ['pki', 'etcd', 'kube-apiserver', 'crds', 'controllers', 'webhooks']],
    ['with a listen address: the forwarder after the API server', { reconcile: true, listenAddress: true }, ['pki', 'etcd', 'kube-apiserver', 'forwarder', 'crds', 'controllers', 'webhooks']],
    ['without reconciling (diagnostics): stops after the API server', { reconcile: false, listenAddress: true }, ['pki', 'etcd', 'kube-apiserver']],
  ])('%s', async (_start, situation, expected) => {
    const ran: string[] = [];
    const sink = new RecordingSink();
    const runner = new StageRunner({ sink });
    const body = Object.fromEntries(names.map((name) => [name, async () => void ran.push(name)])) as Record<ControlPlaneStartStage, () => Promise<unknown>>;
    await runner.runAll(controlPlaneStartStages(situation, body));
    expect(ran).toEqual(expected);
    expect(sink.ofType('stage').filter((s) => s.state === 'succeeded').map((s) => s.stage)).toEqual(expected.map((n) => `controlplane/${n}`));
    expect(runner.timings.map((t) => t.name)).toEqual(expected.map((n) => `controlplane/${n}`));
  });

  it('a failed stage stops the start: nothing after it runs', async () => {
    const ran: string[] = [];
    const body = Object.fromEntries(names.map((name) => [name, async () => (ran.push(name), name === 'crds' ? Promise.reject(new Error('CRD refused')) : undefined)])) as Record<ControlPlaneStartStage, () => Promise<unknown>>;
    const sink = new RecordingSink();
    await expect(new StageRunner({ sink }).runAll(controlPlaneStartStages({ reconcile: true, listenAddress: false }, body))).rejects.toThrow('CRD refused');
    expect(ran).toEqual(['pki', 'etcd', 'kube-apiserver', 'crds']);
    expect(sink.ofType('stage').at(-1)).toMatchObject({ stage: 'controlplane/crds', state: 'failed', message: 'CRD refused' });
  });
});

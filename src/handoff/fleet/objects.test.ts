import { describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import type { KubeObject } from '../../kube/client.js';
import type { Snapshot } from '../../wait/waiter.js';
import { agentBootstrapSecret, fleetApiVersion, fleetCluster, parseRegistrationValues, registrationLabels, registrationSelector, type FleetCluster, type SecretObject } from './objects.js';
import { agentCheckedIn, tokenIssued } from './wait.js';

const identity = { clusterName: 'demo', clusterNamespace: 'demo', clusterId: '6f1c2a9e-0000-4000-8000-000000000001' };
const labels = registrationLabels(identity);
const valuesSecret = (values: unknown): SecretObject => ({
  apiVersion: 'v1',
  kind: 'Secret',
  metadata: { name: 'demo-token-abcde', namespace: 'fleet-default' },
  data: { values: Buffer.from(typeof values === 'string' ? values : stringify(values)).toString('base64') },
});

function snapshot(kind: string, objects: KubeObject[]): Snapshot {
  return new Map([[`${fleetApiVersion}/${kind}`, new Map(objects.map((o) => [`${o.metadata.namespace}/${o.metadata.name}`, o]))]]);
}

function cluster(name: string, extra: Partial<FleetCluster> = {}, withLabels = labels): FleetCluster {
  return { ...fleetCluster(identity, 'fleet-default', { clientID: identity.clusterId }), metadata: { name, namespace: 'fleet-default', labels: withLabels }, ...extra };
}

describe('Fleet registration objects', () => {
  it('selects by every identity label', () => {
    expect(registrationSelector(labels)).toBe(`provisioner.dev/cluster-name=demo,provisioner.dev/cluster-namespace=demo,provisioner.dev/cluster-id=${identity.clusterId}`);
  });

  it('reads the values Fleet writes for a registration token, and names what is wrong with anything else (never a value)', () => {
    const values = { clusterNamespace: 'fleet-default', apiServerURL: 'https://fleet.example:6443', apiServerCA: 'PEM', token: 'sekrit', systemRegistrationNamespace: 'cattle-fleet-clusters-system' };
    expect(parseRegistrationValues(valuesSecret(values))).toEqual(values);
    expect(parseRegistrationValues(valuesSecret({ ...values, apiServerURL: undefined, apiServerCA: undefined }))).toMatchObject({ apiServerURL: '', apiServerCA: '' });
    expect(parseRegistrationValues(valuesSecret({ ...values, token: '' }))).toEqual({ problem: '"values" lacks token' });
    expect(parseRegistrationValues(valuesSecret('[unclosed'))).toEqual({ problem: '"values" is not YAML' });
    expect(parseRegistrationValues(valuesSecret('- a list'))).toEqual({ problem: '"values" is not a YAML mapping' });
    expect(parseRegistrationValues({ ...valuesSecret(values), data: {} })).toEqual({ problem: 'has no "values" key' });
  });

  it('writes the bootstrap Secret with the keys of the fleet-agent chart', () => {
    const secret = agentBootstrapSecret({ token: 't', apiServerURL: 'https://m:6443', apiServerCA: 'PEM', clusterNamespace: 'fleet-default', systemRegistrationNamespace: 'cattle-fleet-clusters-system' }, identity);
    expect(secret.metadata).toMatchObject({ name: 'fleet-agent-bootstrap', namespace: 'cattle-fleet-system' });
    expect(Object.fromEntries(Object.entries(secret.data!).map(([k, v]) => [k, Buffer.from(v, 'base64').toString()]))).toEqual({
      token: 't',
      apiServerURL: 'https://m:6443',
      apiServerCA: 'PEM',
      clusterNamespace: 'fleet-default',
      systemRegistrationNamespace: 'cattle-fleet-clusters-system',
    });
  });
});

describe('Fleet registration waits', () => {
  const registered = { status: { agent: { lastSeen: '2026-11-23T16:00:00Z', namespace: 'cattle-fleet-system' } } };

  it('is done only when the labelled Cluster\'s agent has checked in; an unlabelled or deleting one does not count', () => {
    const evaluate = agentCheckedIn(labels);
    expect(evaluate(snapshot('Cluster', [cluster('demo-abcde')])).state).toBe('waiting');
    expect(evaluate(snapshot('Cluster', [cluster('demo', registered, {}), cluster('demo-abcde')])).state).toBe('waiting');
    expect(evaluate(snapshot('Cluster', [cluster('demo-abcde', { ...registered, metadata: { name: 'demo-abcde', namespace: 'fleet-default', labels, deletionTimestamp: '2026-11-23T16:00:00Z' } })])).state).toBe('waiting');
    const done = evaluate(snapshot('Cluster', [cluster('demo-abcde', registered)]));
    expect(done).toMatchObject({ state: 'done', objects: [{ kind: 'Cluster.fleet.cattle.io', name: 'demo-abcde', ready: true, phase: 'Registered' }] });
    expect(done.objects[0]!.blocking).toBeUndefined();
  });

  it('shows the condition Fleet reported while no agent checked in, else that it waits for a check-in', () => {
    const evaluate = agentCheckedIn(labels);
    const failing = cluster('demo-abcde', { status: { conditions: [{ type: 'Imported', status: 'False', reason: 'Error', message: 'dial tcp 10.0.0.1:6443: connect: connection refused' }] } });
    expect(evaluate(snapshot('Cluster', [failing])).objects[0]!.blocking).toEqual({ condition: 'Imported', reason: 'Error', message: 'dial tcp 10.0.0.1:6443: connect: connection refused' });
    expect(evaluate(snapshot('Cluster', [cluster('demo-abcde')])).objects[0]!.blocking).toMatchObject({ condition: 'AgentCheckIn', reason: 'WaitCheckIn' });
  });

  it('is done with a token once Fleet named its Secret', () => {
    const token = (status: Record<string, unknown>): KubeObject => ({ apiVersion: fleetApiVersion, kind: 'ClusterRegistrationToken', metadata: { name: 'demo-token-abcde', namespace: 'fleet-default', labels }, status });
    expect(tokenIssued(labels)(snapshot('ClusterRegistrationToken', [token({})])).state).toBe('waiting');
    expect(tokenIssued(labels)(snapshot('ClusterRegistrationToken', [token({ secretName: 'demo-token-abcde' })]))).toMatchObject({ state: 'done', objects: [{ phase: 'Issued', ready: true }] });
  });
});

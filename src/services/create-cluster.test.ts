import { describe, expect, it } from 'vitest';
import { validateInstallConfigText } from '../config/index.js';
import type { KubeObject } from '../kube/client.js';
import { generateManifests, installConfigSchema } from '../platforms/index.js';
import { countMachines } from '../wait/healthy.js';
import { partitionByStage, userHooks } from './create-cluster.js';

/** An inmemory install config: 3 control-plane machines, pools of 2 and 4 workers; the rest defaulted. */
const installConfig = `apiVersion: provisioner.dev/v1alpha1
kind: InstallConfig
metadata:
  name: demo
kubernetesVersion: v1.36.3
machinePools:
  - name: control-plane
    quantity: 3
    roles: [etcd, controlPlane]
  - name: worker
    quantity: 2
    roles: [worker]
  - name: gpu
    quantity: 4
    roles: [worker]
platform:
  inmemory: {}
`;

function generatedObjects(layout: 'classic' | 'topology' = 'classic'): KubeObject[] {
  const config = validateInstallConfigText(`${installConfig}manifests:\n  layout: ${layout}\n`, { schema: installConfigSchema }).config;
  return generateManifests(config).manifests.map((m) => m.object as KubeObject);
}

const names = (objects: KubeObject[]) => objects.map((o) => `${o.kind}/${o.metadata.name}`).sort();

describe('partitionByStage', () => {
  it('puts each generated object in its stage, losing none', () => {
    const objects = generatedObjects();
    const staged = partitionByStage(objects);
    expect(staged.infrastructure.map((o) => o.kind).sort()).toEqual(['Cluster', 'DevCluster', 'Namespace']);
    expect(staged.controlPlane.map((o) => o.kind).sort()).toEqual(['DevMachineTemplate', 'KubeadmControlPlane']);
    const kcp = staged.controlPlane.find((o) => o.kind === 'KubeadmControlPlane');
    const cpTemplate = staged.controlPlane.find((o) => o.kind === 'DevMachineTemplate');
    expect((kcp?.spec as { machineTemplate: { spec: { infrastructureRef: { name: string } } } }).machineTemplate.spec.infrastructureRef.name).toBe(cpTemplate?.metadata.name);
    expect(staged.workers.map((o) => o.kind).sort()).toEqual([
      'DevMachineTemplate',
      'DevMachineTemplate',
      'KubeadmConfigTemplate',
      'KubeadmConfigTemplate',
      'MachineDeployment',
      'MachineDeployment',
    ]);
    expect(staged.workers.filter((o) => o.kind === 'MachineDeployment').map((o) => o.metadata.name).sort()).toEqual(['demo-gpu', 'demo-worker']);
    expect(names([...staged.infrastructure, ...staged.controlPlane, ...staged.workers])).toEqual(names(objects));
  });

  it('keeps the input order within a stage', () => {
    const objects = generatedObjects();
    const staged = partitionByStage(objects);
    for (const part of [staged.infrastructure, staged.controlPlane, staged.workers]) {
      const positions = part.map((o) => objects.indexOf(o));
      expect(positions).toEqual([...positions].sort((a, b) => a - b));
    }
  });

  it('puts a topology Cluster, its ClusterClass and every template in the infrastructure stage: the Cluster creates the rest at once', () => {
    const objects = generatedObjects('topology');
    const staged = partitionByStage(objects);
    expect(staged.infrastructure.map((o) => o.kind).sort()).toEqual([
      'Cluster',
      'ClusterClass',
      'DevClusterTemplate',
      'DevMachineTemplate',
      'DevMachineTemplate',
      'DevMachineTemplate',
      'KubeadmConfigTemplate',
      'KubeadmConfigTemplate',
      'KubeadmControlPlaneTemplate',
      'Namespace',
    ]);
    expect(staged.controlPlane).toEqual([]);
    expect(staged.workers).toEqual([]);
  });

  it('places user-added Secrets and ConfigMaps with the infrastructure', () => {
    const secret: KubeObject = { apiVersion: 'v1', kind: 'Secret', metadata: { name: 'creds', namespace: 'demo' } };
    const configMap: KubeObject = { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'addons', namespace: 'demo' } };
    const staged = partitionByStage([secret, configMap]);
    expect(staged.infrastructure).toEqual([secret, configMap]);
    expect(staged.workers).toEqual([]);
  });
});

describe('countMachines', () => {
  it('adds control-plane replicas and every MachineDeployment replicas', () => {
    expect(countMachines(generatedObjects())).toBe(3 + 2 + 4);
  });

  it('adds the replicas a topology Cluster asks for', () => {
    expect(countMachines(generatedObjects('topology'))).toBe(3 + 2 + 4);
  });

  it('counts a missing replicas field as 1 and ignores other kinds', () => {
    const objects: KubeObject[] = [
      { apiVersion: 'controlplane.cluster.x-k8s.io/v1beta2', kind: 'KubeadmControlPlane', metadata: { name: 'cp' }, spec: {} },
      { apiVersion: 'cluster.x-k8s.io/v1beta2', kind: 'MachineDeployment', metadata: { name: 'md' }, spec: { replicas: 0 } },
      { apiVersion: 'cluster.x-k8s.io/v1beta2', kind: 'MachineSet', metadata: { name: 'ms' }, spec: { replicas: 7 } },
    ];
    expect(countMachines(objects)).toBe(1);
  });
});

describe('hook timeouts', () => {
  // The schema validates a timeout and the runtime turns it into a deadline: both must read it the same way,
  // or a timeout the schema accepts (`500us`) fires at once.
  it.each([
    ['500us', 0.5],
    ['1500µs', 1.5],
    ['2000000ns', 2],
    ['250ms', 250],
    ['1.5s', 1_500],
    ['1h30m', 5_400_000],
    ['1m0.5s', 60_500],
  ])('%s validates and runs as %d ms', (timeout, ms) => {
    const text = `${installConfig}hooks:\n  preProvision:\n    - path: ./hook.sh\n      timeout: ${timeout}\n`;
    const { config } = validateInstallConfigText(text, { schema: installConfigSchema }); // throws a ConfigError on a refused value
    expect(userHooks(config, 'preProvision').map((hook) => hook.timeoutMs)).toEqual([ms]);
  });
});

import { mkdtemp, readFile, rm } from 'node:fs/promises';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { validateInstallConfigText } from '../config/index.js';
import { MachinesError } from '../errors.js';
import { RecordingSink } from '../events.js';
import { KubeClient, type KubeObject } from '../kube/client.js';
import { createCertificateAuthority, issueCertificate } from '../pki/certificates.js';
import { writeKubeconfig } from '../pki/kubeconfig.js';
import { allPlatformRules, generateManifests } from '../platforms/index.js';
import { countMachines, parseDurationMs, partitionByStage, waitForReadyNodes } from './create-cluster.js';

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

function generatedObjects(): KubeObject[] {
  const config = validateInstallConfigText(installConfig, { extraRules: allPlatformRules() }).config;
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

  it('counts a missing replicas field as 1 and ignores other kinds', () => {
    const objects: KubeObject[] = [
      { apiVersion: 'controlplane.cluster.x-k8s.io/v1beta2', kind: 'KubeadmControlPlane', metadata: { name: 'cp' }, spec: {} },
      { apiVersion: 'cluster.x-k8s.io/v1beta2', kind: 'MachineDeployment', metadata: { name: 'md' }, spec: { replicas: 0 } },
      { apiVersion: 'cluster.x-k8s.io/v1beta2', kind: 'MachineSet', metadata: { name: 'ms' }, spec: { replicas: 7 } },
    ];
    expect(countMachines(objects)).toBe(1);
  });
});

describe('parseDurationMs', () => {
  it.each([
    ['10m', 600_000],
    ['90s', 90_000],
    ['1h30m', 5_400_000],
    ['1h0m5s', 3_605_000],
    ['250ms', 250],
    ['1.5s', 1_500],
    ['2h', 7_200_000],
  ])('%s is %d ms', (text, ms) => {
    expect(parseDurationMs(text)).toBe(ms);
  });
});

describe('waitForReadyNodes against a local https server standing in for the workload API', () => {
  const readyNode = (name: string, ready: boolean) => ({ metadata: { name }, status: { conditions: [{ type: 'Ready', status: ready ? 'True' : 'False' }] } });

  /** Serves discovery for v1 Nodes and answers node lists with `answer(call)`: a list of nodes, or a status code. */
  async function workloadApi(answer: (call: number) => ReturnType<typeof readyNode>[] | number) {
    const dir = await mkdtemp(path.join(tmpdir(), 'ready-nodes-'));
    const ca = await createCertificateAuthority({ commonName: 'test-ca' });
    const serving = await issueCertificate(ca, { commonName: 'apiserver', ipAddresses: ['127.0.0.1'], usages: 'server' });
    const admin = await issueCertificate(ca, { commonName: 'admin', usages: 'client' });
    let calls = 0;
    const server = https.createServer({ key: serving.keyPem, cert: serving.certPem }, (request, response) => {
      const pathname = new URL(request.url ?? '/', 'https://x').pathname;
      if (pathname === '/api/v1') return response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ resources: [{ name: 'nodes', kind: 'Node', namespaced: false }] }));
      const result = answer(calls++);
      if (typeof result === 'number') return response.writeHead(result).end();
      response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ items: result }));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const kubeconfig = path.join(dir, 'kubeconfig');
    await writeKubeconfig(kubeconfig, { server: `https://127.0.0.1:${(server.address() as AddressInfo).port}`, caCertPem: ca.certPem, clientCertPem: admin.certPem, clientKeyPem: admin.keyPem });
    return {
      kubeconfig,
      calls: () => calls,
      close: async () => {
        server.closeAllConnections();
        await new Promise((resolve) => server.close(resolve));
        await rm(dir, { recursive: true, force: true });
      },
    };
  }

  it('waits through refusals and partial readiness until every expected node is Ready', async () => {
    const api = await workloadApi((call) => (call < 2 ? 500 : call < 4 ? [readyNode('a', true), readyNode('b', false)] : [readyNode('a', true), readyNode('b', true)]));
    const sink = new RecordingSink();
    const workload = KubeClient.fromFile(api.kubeconfig);
    try {
      await waitForReadyNodes(workload, 2, { sink, signal: new AbortController().signal, noProgressTimeoutMs: 10_000, pollMs: 10 });
      expect(api.calls()).toBe(5);
      const messages = sink.ofType('log').map((e) => e.message);
      expect(messages.some((m) => m.includes('does not answer'))).toBe(true);
      expect(messages).toContain('Waiting: 1 of 2 node(s) Ready');
      expect(messages.at(-1)).toBe("The workload cluster's API answers with 2 Ready node(s)");
    } finally {
      workload.close();
      await api.close();
    }
  });

  it('fails with a MachinesError naming what it saw once nothing changes for the no-progress timeout', async () => {
    const api = await workloadApi(() => [readyNode('a', true), readyNode('b', false)]);
    const workload = KubeClient.fromText(await readFile(api.kubeconfig, 'utf8'));
    try {
      const waiting = waitForReadyNodes(workload, 2, { sink: new RecordingSink(), signal: new AbortController().signal, noProgressTimeoutMs: 200, pollMs: 20 });
      await expect(waiting).rejects.toBeInstanceOf(MachinesError);
      await expect(waiting).rejects.toThrow(/No progress for 0 s: 1 of 2 node\(s\) Ready/);
    } finally {
      workload.close();
      await api.close();
    }
  });
});

import { mkdtemp, readFile, rm } from 'node:fs/promises';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { MachinesError } from '../errors.js';
import { RecordingSink } from '../../test/support/recording-sink.js';
import { KubeClient } from '../kube/client.js';
import { createCertificateAuthority, issueCertificate } from '../pki/certificates.js';
import { writeKubeconfig } from '../pki/kubeconfig.js';
import { waitForReadyNodes } from './nodes.js';

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

import { mkdtemp, readFile, rm } from 'node:fs/promises';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it, vi } from 'vitest';
import { MachinesError } from '../errors.js';
import { RecordingSink } from '../../test/support/recording-sink.js';
import { KubeClient } from '../kube/client.js';
import { createCertificateAuthority, issueCertificate } from '../pki/certificates.js';
import { writeKubeconfig } from '../pki/kubeconfig.js';
import { waitForReadyNodes } from './nodes.js';

describe('waitForReadyNodes against a local https server standing in for the workload API', () => {
  const readyNode = (name: string, ready: boolean) => ({ metadata: { name }, status: { conditions: [{ type: 'Ready', status: ready ? 'True' : 'False' }] } });

  type NodeList = ReturnType<typeof readyNode>[];
  /** What a watch request gets: events written one per line (the stream stays open), or `end` (the server closes it at once). */
  type WatchAnswer = { events: { type: string; object: ReturnType<typeof readyNode> | Record<string, unknown> }[] } | 'end';

  /**
   * Serves discovery for v1 Nodes, answers node lists with `list(call)` (nodes, or a status code) and node watches
   * with `watch(call)`, each counted on its own.
   */
  async function workloadApi(list: (call: number) => NodeList | number, watch: (call: number) => WatchAnswer = () => ({ events: [] })) {
    const dir = await mkdtemp(path.join(tmpdir(), 'ready-nodes-'));
    const ca = await createCertificateAuthority({ commonName: 'test-ca' });
    const serving = await issueCertificate(ca, { commonName: 'apiserver', ipAddresses: ['127.0.0.1'], usages: 'server' });
    const admin = await issueCertificate(ca, { commonName: 'admin', usages: 'client' });
    let lists = 0;
    let watches = 0;
    const watchQueries: URLSearchParams[] = [];
    const server = https.createServer({ key: serving.keyPem, cert: serving.certPem }, (request, response) => {
      const url = new URL(request.url ?? '/', 'https://x');
      if (url.pathname === '/api/v1') return response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ resources: [{ name: 'nodes', kind: 'Node', namespaced: false }] }));
      if (url.searchParams.get('watch') === 'true') {
        watchQueries.push(url.searchParams);
        const answer = watch(watches++);
        response.writeHead(200, { 'content-type': 'application/json' });
        if (answer === 'end') return response.end();
        for (const event of answer.events) response.write(`${JSON.stringify(event)}\n`);
        return;
      }
      const result = list(lists++);
      if (typeof result === 'number') return response.writeHead(result).end();
      response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ metadata: { resourceVersion: String(100 + lists) }, items: result }));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const kubeconfig = path.join(dir, 'kubeconfig');
    await writeKubeconfig(kubeconfig, { server: `https://127.0.0.1:${(server.address() as AddressInfo).port}`, caCertPem: ca.certPem, clientCertPem: admin.certPem, clientKeyPem: admin.keyPem });
    return {
      kubeconfig,
      lists: () => lists,
      watches: () => watches,
      watchQueries,
      /** Ends every open request, as a restarting server would. */
      dropConnections: () => server.closeAllConnections(),
      close: async () => {
        server.closeAllConnections();
        await new Promise((resolve) => server.close(resolve));
        await rm(dir, { recursive: true, force: true });
      },
    };
  }

  it('waits through refusals, then ends on the watch event that makes the last expected node Ready', async () => {
    // The list never shows b Ready: only the watch from that list's resourceVersion does.
    const api = await workloadApi(
      (call) => (call < 2 ? 500 : [readyNode('a', true), readyNode('b', false)]),
      () => ({ events: [{ type: 'MODIFIED', object: readyNode('a', true) }, { type: 'MODIFIED', object: readyNode('b', true) }] }),
    );
    const sink = new RecordingSink();
    const workload = KubeClient.fromFile(api.kubeconfig);
    try {
      await waitForReadyNodes(workload, 2, { sink, signal: new AbortController().signal, noProgressTimeoutMs: 10_000, pollMs: 10 });
      expect(api.lists()).toBe(3);
      expect(api.watches()).toBe(1);
      expect(api.watchQueries[0]?.get('resourceVersion')).toBe('103');
      const messages = sink.ofType('log').map((e) => e.message);
      expect(messages.some((m) => m.includes('does not answer'))).toBe(true);
      expect(messages).toContain('Waiting: 1 of 2 node(s) Ready');
      expect(messages.at(-1)).toBe("The workload cluster's API answers with 2 Ready node(s)");
    } finally {
      workload.close();
      await api.close();
    }
  });

  it('lists again when the server ends the watch, and counts a deleted node out', async () => {
    const api = await workloadApi(
      (call) => (call === 0 ? [readyNode('a', true), readyNode('b', false)] : [readyNode('a', true), readyNode('c', true)]),
      (call) => (call === 0 ? { events: [{ type: 'DELETED', object: readyNode('a', true) }] } : 'end'),
    );
    const sink = new RecordingSink();
    const workload = KubeClient.fromFile(api.kubeconfig);
    try {
      // The first watch holds its stream open after the deletion (0 of 2 Ready); nothing more comes on it until
      // the server ends it, here by closing every connection once the deletion was seen.
      const waiting = waitForReadyNodes(workload, 2, { sink, signal: new AbortController().signal, noProgressTimeoutMs: 10_000, pollMs: 10 });
      await vi.waitFor(() => expect(sink.ofType('log').map((e) => e.message)).toContain('Waiting: 0 of 2 node(s) Ready'));
      api.dropConnections();
      await waiting;
      expect(api.lists()).toBe(2);
      expect(sink.ofType('log').map((e) => e.message).at(-1)).toBe("The workload cluster's API answers with 2 Ready node(s)");
    } finally {
      workload.close();
      await api.close();
    }
  });

  it('lists again, reporting nothing, when the watch says its resourceVersion is gone (410)', async () => {
    const api = await workloadApi(
      (call) => (call === 0 ? [readyNode('a', true), readyNode('b', false)] : [readyNode('a', true), readyNode('b', true)]),
      () => ({ events: [{ type: 'ERROR', object: { kind: 'Status', code: 410, reason: 'Expired', message: 'too old resource version' } }] }),
    );
    const sink = new RecordingSink();
    const workload = KubeClient.fromFile(api.kubeconfig);
    try {
      await waitForReadyNodes(workload, 2, { sink, signal: new AbortController().signal, noProgressTimeoutMs: 10_000, pollMs: 10 });
      expect(api.lists()).toBe(2);
      expect(sink.ofType('log').map((e) => e.message).filter((m) => m.includes('does not answer'))).toEqual([]);
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

import { mkdtemp, rm } from 'node:fs/promises';
import type { IncomingMessage, ServerResponse } from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createCertificateAuthority, issueCertificate } from '../pki/certificates.js';
import { writeKubeconfig } from '../pki/kubeconfig.js';
import { KubeApiError, KubeClient, type KubeObject, type WatchPhase } from './client.js';

type Handler = (request: IncomingMessage, response: ServerResponse) => void;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const eventLine = (type: string, object: unknown) => `${JSON.stringify({ type, object })}\n`;
const thing = (name: string): KubeObject => ({ apiVersion: 'example.com/v1', kind: 'Thing', metadata: { name, namespace: 'ns' } });

describe('KubeClient against a local https server', () => {
  let dir: string;
  let server: https.Server;
  let client: KubeClient;
  /** Requests seen, as `METHOD pathname`. */
  let seen: string[];
  let handler: Handler;

  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'kube-client-'));
    const ca = await createCertificateAuthority({ commonName: 'test-ca' });
    const serving = await issueCertificate(ca, { commonName: 'apiserver', ipAddresses: ['127.0.0.1'], usages: 'server' });
    const admin = await issueCertificate(ca, { commonName: 'admin', organizations: ['system:masters'], usages: 'client' });
    server = https.createServer({ key: serving.keyPem, cert: serving.certPem, ca: ca.certPem, requestCert: true, rejectUnauthorized: true }, (request, response) => {
      seen.push(`${request.method} ${new URL(request.url ?? '/', 'https://x').pathname}`);
      handler(request, response);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    const kubeconfig = path.join(dir, 'admin.kubeconfig');
    await writeKubeconfig(kubeconfig, { server: `https://127.0.0.1:${port}`, caCertPem: ca.certPem, clientCertPem: admin.certPem, clientKeyPem: admin.keyPem });
    client = KubeClient.fromFile(kubeconfig);
  });

  afterAll(async () => {
    client.close();
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
    await rm(dir, { recursive: true, force: true });
  });

  beforeEach(() => {
    seen = [];
    handler = (_request, response) => {
      response.writeHead(404).end();
    };
  });

  /** Starts a watch, collecting events and onDone calls. */
  async function startWatch(apiPath = '/apis/example.com/v1/namespaces/ns/things') {
    const events: [WatchPhase, string][] = [];
    const done: (Error | undefined)[] = [];
    const stop = await client.watch(apiPath, { resourceVersion: '10' }, (phase, obj) => events.push([phase, obj.metadata.name]), (error) => done.push(error));
    return { events, done, stop };
  }

  describe('watch', () => {
    it('delivers events split across chunks in order, then onDone once without error', async () => {
      let query: URLSearchParams | undefined;
      handler = (request, response) => {
        query = new URL(request.url ?? '/', 'https://x').searchParams;
        response.writeHead(200, { 'content-type': 'application/json' });
        const stream = eventLine('ADDED', thing('first')) + eventLine('MODIFIED', thing('second'));
        // Cut inside the first object and inside the second line's type.
        const cuts = [20, stream.indexOf('MODI') + 2, stream.length];
        void (async () => {
          let from = 0;
          for (const cut of cuts) {
            response.write(stream.slice(from, cut));
            from = cut;
            await sleep(30);
          }
          response.end();
        })();
      };
      const watch = await startWatch();
      await expect.poll(() => watch.done.length, { timeout: 5_000 }).toBe(1);
      expect(watch.events).toEqual([
        ['ADDED', 'first'],
        ['MODIFIED', 'second'],
      ]);
      expect(watch.done).toEqual([undefined]);
      expect(query?.get('watch')).toBe('true');
      expect(query?.get('resourceVersion')).toBe('10');
      expect(query?.get('timeoutSeconds')).toBe('300');
      await sleep(50);
      expect(watch.done).toHaveLength(1);
    });

    it('ends with a KubeApiError on an ERROR event, delivering nothing after it', async () => {
      handler = (_request, response) => {
        response.writeHead(200);
        response.write(eventLine('ADDED', thing('before')));
        response.write(eventLine('ERROR', { kind: 'Status', code: 410, reason: 'Expired', message: 'too old resource version: 10 (20)' }));
        response.write(eventLine('ADDED', thing('after')));
        // Left open: the client closes it.
      };
      const watch = await startWatch();
      await expect.poll(() => watch.done.length, { timeout: 5_000 }).toBe(1);
      const [error] = watch.done;
      expect(error).toBeInstanceOf(KubeApiError);
      expect(error).toMatchObject({ statusCode: 410, reason: 'Expired' });
      expect(error?.message).toContain('too old resource version');
      expect(watch.events).toEqual([['ADDED', 'before']]);
      await sleep(50);
      expect(watch.done).toHaveLength(1);
    });

    it('ends with a KubeApiError carrying the status of a refused watch', async () => {
      handler = (_request, response) => {
        response.writeHead(403, { 'content-type': 'application/json' }).end('{"kind":"Status","reason":"Forbidden"}');
      };
      const watch = await startWatch();
      await expect.poll(() => watch.done.length, { timeout: 5_000 }).toBe(1);
      expect(watch.done[0]).toBeInstanceOf(KubeApiError);
      expect((watch.done[0] as KubeApiError).statusCode).toBe(403);
    });

    it('does not call onDone after stop(), nor deliver later events', async () => {
      let open: ServerResponse | undefined;
      handler = (_request, response) => {
        response.writeHead(200);
        response.write(eventLine('ADDED', thing('one')));
        open = response;
      };
      const watch = await startWatch();
      await expect.poll(() => watch.events.length, { timeout: 5_000 }).toBe(1);
      watch.stop();
      if (!open?.destroyed) open?.end(eventLine('ADDED', thing('two')));
      await sleep(200);
      expect(watch.done).toEqual([]);
      expect(watch.events).toEqual([['ADDED', 'one']]);
    });
  });

  describe('request retries', () => {
    it('retries a GET answered 429 and returns the body of the first success', async () => {
      let calls = 0;
      handler = (_request, response) => {
        calls += 1;
        if (calls <= 2) response.writeHead(429, { 'retry-after': '0', 'content-type': 'application/json' }).end('{"kind":"Status","reason":"TooManyRequests","message":"slow down"}');
        else response.writeHead(200).end('ok after retries');
      };
      await expect(client.raw('/readyz')).resolves.toBe('ok after retries');
      expect(calls).toBe(3);
    });

    it('gives up on a GET after its attempts and reports the status', async () => {
      handler = (_request, response) => {
        response.writeHead(404, { 'content-type': 'application/json' }).end('{"kind":"Status","reason":"NotFound","message":"no such path"}');
      };
      const error: unknown = await client.raw('/missing').catch((e: unknown) => e);
      expect(error).toBeInstanceOf(KubeApiError);
      expect(error).toMatchObject({ statusCode: 404, reason: 'NotFound' });
      // 404 is not transient: asked once.
      expect(seen).toEqual(['GET /missing']);
    });

    it('does not retry a PATCH answered 429', async () => {
      handler = (request, response) => {
        if (request.method === 'GET' && request.url === '/apis/example.com/v1') {
          response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ resources: [{ name: 'things', kind: 'Thing', namespaced: true }, { name: 'things/status', kind: 'Thing', namespaced: true }] }));
          return;
        }
        response.writeHead(429, { 'retry-after': '0', 'content-type': 'application/json' }).end('{"kind":"Status","reason":"TooManyRequests","message":"slow down"}');
      };
      const error: unknown = await client.mergePatch(thing('a'), { metadata: { labels: { x: 'y' } } }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(KubeApiError);
      expect(error).toMatchObject({ statusCode: 429, reason: 'TooManyRequests', retryAfterSeconds: 0 });
      expect((error as Error).message).toBe('Thing ns/a: slow down');
      expect(seen).toEqual(['GET /apis/example.com/v1', 'PATCH /apis/example.com/v1/namespaces/ns/things/a']);
    });
  });
});

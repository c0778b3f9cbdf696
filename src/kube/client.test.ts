import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import type { ServerResponse } from 'node:http';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parse, stringify } from 'yaml';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { KubeApiError, KubeClient, type KubeObject, type WatchPhase } from './client.js';
import { answerStatus, servesThings, TestApiServer } from '../../test/support/test-api-server.js';
import { sleep } from '../concurrency.js';

/** The parts of a kubeconfig written by writeKubeconfig that the tests rewrite. */
interface Kubeconfig {
  clusters: { name: string; cluster: { server: string; 'certificate-authority-data'?: string } }[];
  users: { name: string; user: { 'client-certificate-data'?: string; 'client-key-data'?: string } }[];
}

const eventLine = (type: string, object: unknown) => `${JSON.stringify({ type, object })}\n`;
const thing = (name: string): KubeObject => ({ apiVersion: 'example.com/v1', kind: 'Thing', metadata: { name, namespace: 'ns' } });

describe('KubeClient against a local https server', () => {
  let server: TestApiServer;

  beforeAll(async () => {
    server = await TestApiServer.start();
  });

  afterAll(async () => {
    await server.close();
  });

  beforeEach(() => {
    server.reset();
  });

  /** Starts a watch, collecting events and onDone calls. */
  async function startWatch(apiPath = '/apis/example.com/v1/namespaces/ns/things') {
    const events: [WatchPhase, string][] = [];
    const done: (Error | undefined)[] = [];
    const stop = await server.client.watch(apiPath, { resourceVersion: '10' }, (phase, obj) => events.push([phase, obj.metadata.name]), (error) => done.push(error));
    return { events, done, stop };
  }

  describe('watch', () => {
    it('delivers events split across chunks in order, then onDone once without error', async () => {
      let query: URLSearchParams | undefined;
      server.handler = (request, response) => {
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
      server.handler = (_request, response) => {
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
      server.handler = (_request, response) => {
        response.writeHead(403, { 'content-type': 'application/json' }).end('{"kind":"Status","reason":"Forbidden"}');
      };
      const watch = await startWatch();
      await expect.poll(() => watch.done.length, { timeout: 5_000 }).toBe(1);
      expect(watch.done[0]).toBeInstanceOf(KubeApiError);
      expect((watch.done[0] as KubeApiError).statusCode).toBe(403);
    });

    it('does not call onDone after stop(), nor deliver later events', async () => {
      let open: ServerResponse | undefined;
      server.handler = (_request, response) => {
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

  describe('kubeconfig', () => {
    let dir: string;
    let written: Kubeconfig;
    const pem = (base64: string) => Buffer.from(base64, 'base64').toString('utf8');

    beforeAll(async () => {
      written = parse(await readFile(server.kubeconfig, 'utf8')) as Kubeconfig;
    });
    beforeEach(async () => {
      dir = await mkdtemp(path.join(tmpdir(), 'kubeconfig-variant-'));
    });
    afterEach(async () => {
      await rm(dir, { recursive: true, force: true });
    });

    /** The test server's kubeconfig with its cluster and user entries replaced, written to dir/kubeconfig; a client of it and what the server saw. */
    async function clientOf(cluster: Record<string, unknown>, user: Record<string, unknown>): Promise<{ client: KubeClient; authorization: () => string | undefined }> {
      const variant = {
        ...written,
        clusters: [{ name: written.clusters[0]!.name, cluster: { server: written.clusters[0]!.cluster.server, ...cluster } }],
        users: [{ name: written.users[0]!.name, user }],
      };
      await writeFile(path.join(dir, 'kubeconfig'), stringify(variant), { mode: 0o600 });
      let authorization: string | undefined;
      server.handler = (request, response) => {
        authorization = request.headers.authorization;
        response.writeHead(200, { 'content-type': 'application/json' }).end('{"gitVersion":"v1.35.0"}');
      };
      return { client: KubeClient.fromFile(path.join(dir, 'kubeconfig')), authorization: () => authorization };
    }

    /** The test server's CA, client certificate and key as PEM files under dir/pki. */
    async function writePki(): Promise<void> {
      await mkdir(path.join(dir, 'pki'));
      await writeFile(path.join(dir, 'pki', 'ca.crt'), pem(written.clusters[0]!.cluster['certificate-authority-data']!));
      await writeFile(path.join(dir, 'pki', 'admin.crt'), pem(written.users[0]!.user['client-certificate-data']!));
      await writeFile(path.join(dir, 'pki', 'admin.key'), pem(written.users[0]!.user['client-key-data']!), { mode: 0o600 });
    }

    it('reaches the server with certificates the kubeconfig names by paths relative to its own directory', async () => {
      await writePki();
      const { client } = await clientOf({ 'certificate-authority': 'pki/ca.crt' }, { 'client-certificate': 'pki/admin.crt', 'client-key': 'pki/admin.key' });
      try {
        expect(client.cluster).toEqual({ name: written.clusters[0]!.name, server: written.clusters[0]!.cluster.server, caFile: path.join(dir, 'pki', 'ca.crt') });
        expect(await client.raw('/version')).toBe('{"gitVersion":"v1.35.0"}');
      } finally {
        client.close();
      }
    });

    it("sends a token file's token, without its trailing newline, beside the certificates", async () => {
      await writeFile(path.join(dir, 'token'), 's3cret\n', { mode: 0o600 });
      const { user } = written.users[0]!;
      const { client, authorization } = await clientOf({ 'certificate-authority-data': written.clusters[0]!.cluster['certificate-authority-data'] }, { ...user, 'token-file': 'token' });
      try {
        await client.raw('/version');
        expect(authorization()).toBe('Bearer s3cret');
      } finally {
        client.close();
      }
    });

    it("takes an exec plugin's credential (token and client certificate) through the client library", async () => {
      const { user } = written.users[0]!;
      const credential = {
        apiVersion: 'client.authentication.k8s.io/v1',
        kind: 'ExecCredential',
        status: { token: 'from-exec', clientCertificateData: pem(user['client-certificate-data']!), clientKeyData: pem(user['client-key-data']!) },
      };
      await writeFile(path.join(dir, 'credential.json'), JSON.stringify(credential), { mode: 0o600 });
      await writeFile(path.join(dir, 'plugin.sh'), `#!/bin/sh\ncat "${path.join(dir, 'credential.json')}"\n`, { mode: 0o700 });
      const exec = { apiVersion: 'client.authentication.k8s.io/v1', command: path.join(dir, 'plugin.sh'), interactiveMode: 'Never' };
      const { client, authorization } = await clientOf({ 'certificate-authority-data': written.clusters[0]!.cluster['certificate-authority-data'] }, { exec });
      try {
        expect(await client.raw('/version')).toBe('{"gitVersion":"v1.35.0"}');
        expect(authorization()).toBe('Bearer from-exec');
      } finally {
        client.close();
      }
    });

    it('a kubeconfig whose current context names no cluster gives a client without one, whose requests fail as NoCluster', async () => {
      const client = KubeClient.fromText(stringify({ apiVersion: 'v1', kind: 'Config', 'current-context': 'gone', contexts: [], clusters: [], users: [] }));
      expect(client.cluster).toBeUndefined();
      expect(client.server).toBe('');
      await expect(client.raw('/version')).rejects.toMatchObject({ reason: 'NoCluster' });
    });
  });

  describe('request retries', () => {
    it('retries a GET answered 429 and returns the body of the first success', async () => {
      let calls = 0;
      server.handler = (_request, response) => {
        calls += 1;
        if (calls <= 2) response.writeHead(429, { 'retry-after': '0', 'content-type': 'application/json' }).end('{"kind":"Status","reason":"TooManyRequests","message":"slow down"}');
        else response.writeHead(200).end('ok after retries');
      };
      await expect(server.client.raw('/readyz')).resolves.toBe('ok after retries');
      expect(calls).toBe(3);
    });

    it('retries a list answered 504 (the watch cache not fresh in time under a burst of writes)', async () => {
      let calls = 0;
      server.handler = (_request, response) => {
        calls += 1;
        if (calls === 1) response.writeHead(504, { 'content-type': 'application/json' }).end('{"kind":"Status","reason":"Timeout","message":"Timeout: Too large resource version: 20334, current: 20151","code":504}');
        else response.writeHead(200).end('ok after a retry');
      };
      await expect(server.client.raw('/apis/cluster.x-k8s.io/v1beta2/machines')).resolves.toBe('ok after a retry');
      expect(calls).toBe(2);
    });

    it('gives up on a GET after its attempts and reports the status', async () => {
      server.handler = (_request, response) => {
        response.writeHead(404, { 'content-type': 'application/json' }).end('{"kind":"Status","reason":"NotFound","message":"no such path"}');
      };
      const error: unknown = await server.client.raw('/missing').catch((e: unknown) => e);
      expect(error).toBeInstanceOf(KubeApiError);
      expect(error).toMatchObject({ statusCode: 404, reason: 'NotFound' });
      // 404 is not transient: asked once.
      expect(server.seen).toEqual(['GET /missing']);
    });

    it('names the kind and apiVersion of an object whose group version the server does not serve', async () => {
      // The default handler answers 404 to everything, discovery of example.com/v1 included.
      const error: unknown = await server.client.apply(thing('a')).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(KubeApiError);
      expect(error).toMatchObject({ statusCode: 404, isNotFound: true });
      expect((error as Error).message).toBe('the server does not serve Thing in example.com/v1');
    });

    it('does not retry a PATCH answered 429', async () => {
      server.handler = (request, response) => {
        if (servesThings(request, response)) return;
        response.writeHead(429, { 'retry-after': '0', 'content-type': 'application/json' }).end('{"kind":"Status","reason":"TooManyRequests","message":"slow down"}');
      };
      const error: unknown = await server.client.mergePatch(thing('a'), { metadata: { labels: { x: 'y' } } }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(KubeApiError);
      expect(error).toMatchObject({ statusCode: 429, reason: 'TooManyRequests', retryAfterSeconds: 0 });
      expect((error as Error).message).toBe('Thing ns/a: slow down');
      expect(server.seen).toEqual(['GET /apis/example.com/v1', 'PATCH /apis/example.com/v1/namespaces/ns/things/a']);
    });
  });

  describe('error classification, from Status bodies kube-apiserver v1.36.3 sent', () => {
    /** Applies a Thing answered with `status`; returns the error the client threw. */
    async function applyAnswered(status: { code: number; [field: string]: unknown }): Promise<KubeApiError> {
      server.handler = (request, response) => {
        if (!servesThings(request, response)) answerStatus(response, status);
      };
      const error: unknown = await server.client.apply(thing('a')).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(KubeApiError);
      return error as KubeApiError;
    }

    it('a webhook that is not serving yet (500 InternalError, dial error) is transient', async () => {
      const error = await applyAnswered(statusBodies.webhookRefused);
      expect(error).toMatchObject({ statusCode: 500, reason: 'InternalError', isTransient: true, isDenied: false });
      expect(error.causes[0]?.message).toMatch(/^failed calling webhook "down.example.com": .*connect: connection refused$/);
    });

    it('a webhook that did not answer in time (500 InternalError, deadline exceeded) is transient', async () => {
      expect(await applyAnswered(statusBodies.webhookTimeout)).toMatchObject({ isTransient: true, isDenied: false });
    });

    it.each([
      ['403 Forbidden', 'denied403', 403, 'Forbidden'],
      ['422 Invalid, with field causes', 'denied422', 422, 'Invalid'],
      ['400 without a reason', 'deniedPlain', 400, 'Bad Request'],
      ['500 without a reason (the webhook chose the code)', 'denied500', 500, 'Internal Server Error'],
    ] as const)('a webhook denial answered %s is final', async (_what, body, code, reason) => {
      const error = await applyAnswered(statusBodies[body]);
      expect(error).toMatchObject({ statusCode: code, reason, isDenied: true, isTransient: false });
    });

    it("server-side apply's 500 for a field the schema lacks or a value of the wrong type is final", async () => {
      for (const body of [statusBodies.fieldNotDeclared, statusBodies.wrongType]) {
        expect(await applyAnswered(body)).toMatchObject({ statusCode: 500, isInvalidPatch: true, isTransient: false });
      }
    });

    it('an RBAC refusal (403 Forbidden, no webhook) is final; throttling (429) and an unavailable server (503) are transient', async () => {
      expect(await applyAnswered(statusBodies.rbacForbidden)).toMatchObject({ statusCode: 403, isDenied: false, isTransient: false });
      expect(await applyAnswered({ kind: 'Status', status: 'Failure', message: 'slow down', reason: 'TooManyRequests', code: 429 })).toMatchObject({ isTransient: true });
      expect(await applyAnswered({ kind: 'Status', status: 'Failure', message: 'the server is currently unable to handle the request', reason: 'ServiceUnavailable', code: 503 })).toMatchObject({ isTransient: true });
    });

    it('a 404 whose object names a webhook configuration is not transient', async () => {
      const body = { kind: 'Status', status: 'Failure', message: 'validatingwebhookconfigurations.admissionregistration.k8s.io "capi-validating-webhook-configuration" not found', reason: 'NotFound', code: 404 };
      expect(await applyAnswered(body)).toMatchObject({ isNotFound: true, isTransient: false });
    });

    it('no answer at all (connection refused) is transient', async () => {
      const kubeconfig = await readFile(server.kubeconfig, 'utf8');
      const closed = KubeClient.fromText(kubeconfig.replace(/https:\/\/127\.0\.0\.1:\d+/, `https://127.0.0.1:${await closedPort()}`));
      try {
        const error: unknown = await closed.raw('/readyz').catch((e: unknown) => e);
        expect(error).toBeInstanceOf(KubeApiError);
        expect(error).toMatchObject({ statusCode: 0, isTransient: true });
        expect((error as Error).message).toMatch(/ECONNREFUSED/);
      } finally {
        closed.close();
      }
    });
  });
});

/** A loopback port nothing listens on (bound, then released). */
async function closedPort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const { port } = probe.address() as AddressInfo;
  await new Promise((resolve) => probe.close(resolve));
  return port;
}

/**
 * Status bodies as kube-apiserver v1.36.3 (the bundled one) sent them, recorded against a
 * ValidatingWebhookConfiguration whose webhooks refuse connections, hang past their
 * timeout, or answer "not allowed" with a 403, a 422 with causes, no status, or a 500.
 */
const statusBodies = {
  webhookRefused: {
    kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure',
    message: 'Internal error occurred: failed calling webhook "down.example.com": failed to call webhook: Post "https://127.0.0.1:33057/validate?timeout=5s": dial tcp 127.0.0.1:33057: connect: connection refused',
    reason: 'InternalError',
    details: { causes: [{ message: 'failed calling webhook "down.example.com": failed to call webhook: Post "https://127.0.0.1:33057/validate?timeout=5s": dial tcp 127.0.0.1:33057: connect: connection refused' }] },
    code: 500,
  },
  webhookTimeout: {
    kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure',
    message: 'Internal error occurred: failed calling webhook "hang.example.com": failed to call webhook: Post "https://127.0.0.1:35367/hang?timeout=1s": context deadline exceeded',
    reason: 'InternalError',
    details: { causes: [{ message: 'failed calling webhook "hang.example.com": failed to call webhook: Post "https://127.0.0.1:35367/hang?timeout=1s": context deadline exceeded' }] },
    code: 500,
  },
  denied403: {
    kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure',
    message: 'admission webhook "deny403.example.com" denied the request: spec.clusterName: Forbidden: field is immutable',
    reason: 'Forbidden',
    code: 403,
  },
  denied422: {
    kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure',
    message: 'admission webhook "deny422.example.com" denied the request: ConfigMap "deny422" is invalid: data.replicas: Invalid value: "2": must be odd',
    reason: 'Invalid',
    details: { name: 'deny422', kind: 'ConfigMap', causes: [{ reason: 'FieldValueInvalid', message: 'Invalid value: "2": must be odd', field: 'data.replicas' }] },
    code: 422,
  },
  deniedPlain: {
    kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure',
    message: 'admission webhook "denyplain.example.com" denied the request without explanation',
    code: 400,
  },
  denied500: {
    kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure',
    message: 'admission webhook "deny500.example.com" denied the request: cannot look up the cluster',
    code: 500,
  },
  fieldNotDeclared: {
    kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure',
    message: 'failed to create typed patch object (/unknownfield; /v1, Kind=ConfigMap): .spec: field not declared in schema',
    code: 500,
  },
  wrongType: {
    kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure',
    message: 'failed to create typed patch object (/wrongtype; /v1, Kind=ConfigMap): .data.a: expected string, got &value.valueUnstructured{Value:1}',
    code: 500,
  },
  rbacForbidden: {
    kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure',
    message: 'configmaps is forbidden: User "nobody" cannot create resource "configmaps" in API group "" in the namespace "default"',
    reason: 'Forbidden',
    details: { kind: 'configmaps' },
    code: 403,
  },
};

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ExternalError } from '../../errors.js';
import { RecordingSink } from '../../../test/support/recording-sink.js';
import { answerStatus, TestApiServer } from '../../../test/support/test-api-server.js';
import { createManifestObjects, parseManifest, redactUrl } from './manifest.js';

const source = 'https://rancher.example/…';
const failureOf = (fn: () => unknown): ExternalError => {
  try {
    fn();
  } catch (error) {
    return error as ExternalError;
  }
  throw new Error('expected a failure');
};

describe('parseManifest', () => {
  it('returns every object in order, List items included, and skips empty documents', () => {
    const text = 'apiVersion: v1\nkind: Namespace\nmetadata: {name: cattle-system}\n---\n---\napiVersion: v1\nkind: List\nitems:\n  - {apiVersion: v1, kind: ServiceAccount, metadata: {name: cattle, namespace: cattle-system}}\n';
    expect(parseManifest(text, source, 'c-abcde').map((o) => `${o.kind}/${o.metadata.name}`)).toEqual(['Namespace/cattle-system', 'ServiceAccount/cattle']);
  });

  it('refuses an HTML page, naming the document and saying nothing was created', () => {
    const error = failureOf(() => parseManifest('<html><body>Sign in</body></html>', source, 'c-abcde'));
    expect(error).toBeInstanceOf(ExternalError);
    expect(error.message).toBe(`The registration manifest Rancher served for c-abcde (${source}) is not a Kubernetes manifest; nothing was created in the workload cluster`);
    expect(error.details).toEqual(['document 1: expected an object with apiVersion, kind and metadata, got text']);
  });

  it('refuses the whole manifest when one document is broken YAML or lacks a kind or a name, listing each', () => {
    const text = 'apiVersion: v1\nkind: Namespace\nmetadata: {name: ok}\n---\napiVersion: v1\nmetadata: {name: x}\n---\napiVersion: v1\nkind: Secret\nmetadata: {}\n---\nkind: [unclosed\n';
    const error = failureOf(() => parseManifest(text, source, 'c-abcde'));
    expect(error.details[0]).toBe('document 2: no kind');
    expect(error.details[1]).toBe('document 3: Secret without metadata.name');
    expect(error.details[2]).toMatch(/^document 4: /);
  });

  it('refuses an empty answer', () => {
    expect(failureOf(() => parseManifest('', source, 'c-abcde')).details).toEqual(['no object at all (an empty answer)']);
  });
});

describe('redactUrl', () => {
  it('keeps the origin and drops the path that holds the token', () => {
    expect(redactUrl('https://rancher.example:8443/v3/import/s3cr3t_c-abcde.yaml')).toBe('https://rancher.example:8443/…');
  });
});

describe('createManifestObjects', () => {
  let server: TestApiServer;
  beforeAll(async () => {
    server = await TestApiServer.start();
  });
  afterAll(async () => {
    await server.close();
  });

  const objects = ['a', 'b', 'c', 'd'].map((name) => ({ apiVersion: 'v1', kind: 'Namespace', metadata: { name } }));
  const discovery = (url: string | undefined) => url === '/api/v1';

  it('counts AlreadyExists as done and reports, on a refusal, what was created, what existed, what failed and what was not tried', async () => {
    server.reset();
    server.handler = (request, response) => {
      if (request.method === 'GET' && discovery(request.url)) return void response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ resources: [{ name: 'namespaces', kind: 'Namespace', namespaced: false }] }));
      let body = '';
      request.on('data', (chunk: Buffer) => (body += chunk.toString()));
      request.on('end', () => {
        const name = (JSON.parse(body) as { metadata: { name: string } }).metadata.name;
        if (name === 'b') return answerStatus(response, { code: 409, reason: 'AlreadyExists', message: 'namespaces "b" already exists' });
        if (name === 'c') return answerStatus(response, { code: 422, reason: 'Invalid', message: 'namespaces "c" is invalid' });
        response.writeHead(201, { 'content-type': 'application/json' }).end(body);
      });
    };
    const error = await createManifestObjects(server.client, objects, { sink: new RecordingSink(), signal: new AbortController().signal, what: 'c-abcde' }).then(
      () => undefined,
      (e: unknown) => e as ExternalError,
    );
    expect(error).toBeInstanceOf(ExternalError);
    expect(error!.message).toBe('Creating the registration manifest\'s objects of c-abcde in the workload cluster failed at Namespace c: Namespace c: namespaces "c" is invalid');
    expect(error!.details).toEqual(['created by this run (1): Namespace a', 'already there (1): Namespace b', 'failed: Namespace c', 'not tried (1): Namespace d']);
    expect(server.seen.filter((s) => s.startsWith('POST'))).toHaveLength(3);
  });
});

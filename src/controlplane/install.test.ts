import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { KubeApiError, type KubeObject } from '../kube/client.js';
import { answerStatus, servesThings, TestApiServer } from '../../test/support/test-api-server.js';
import { createHash } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { applyAll, loadComponents, namesAcceptedNotEstablished } from './install.js';

const thing: KubeObject = { apiVersion: 'example.com/v1', kind: 'Thing', metadata: { name: 'a', namespace: 'ns' } };
const patchPath = 'PATCH /apis/example.com/v1/namespaces/ns/things/a';

describe('applyAll retries by what the server answered', () => {
  let server: TestApiServer;
  beforeAll(async () => {
    server = await TestApiServer.start();
  });
  afterAll(async () => {
    await server.close();
  });
  beforeEach(() => server.reset());

  it('sends a request an admission webhook denied once, and fails with the denial', async () => {
    server.handler = (request, response) => {
      if (servesThings(request, response)) return;
      // As kube-apiserver v1.36.3 sent it (see kube/client.test.ts).
      answerStatus(response, {
        kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure',
        message: 'admission webhook "deny422.example.com" denied the request: ConfigMap "deny422" is invalid: data.replicas: Invalid value: "2": must be odd',
        reason: 'Invalid',
        details: { name: 'deny422', kind: 'ConfigMap', causes: [{ reason: 'FieldValueInvalid', message: 'Invalid value: "2": must be odd', field: 'data.replicas' }] },
        code: 422,
      });
    };
    const error: unknown = await applyAll(server.client, [thing]).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(KubeApiError);
    expect(error).toMatchObject({ statusCode: 422, isDenied: true });
    expect(server.seen.filter((r) => r === patchPath)).toHaveLength(1);
  });

  it('retries while the webhook is not serving yet, until it is', async () => {
    let patches = 0;
    server.handler = (request, response) => {
      if (servesThings(request, response)) return;
      patches += 1;
      if (patches <= 2) {
        const call = 'failed calling webhook "down.example.com": failed to call webhook: Post "https://127.0.0.1:33057/validate?timeout=5s": dial tcp 127.0.0.1:33057: connect: connection refused';
        answerStatus(response, { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message: `Internal error occurred: ${call}`, reason: 'InternalError', details: { causes: [{ message: call }] }, code: 500 });
        return;
      }
      response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(thing));
    };
    await applyAll(server.client, [thing]);
    expect(server.seen.filter((r) => r === patchPath)).toHaveLength(3);
  });
});

describe('loadComponents', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'components-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('keeps its parse as JSON in the cache by the YAML\'s sha256, reads it from there, and parses again when it does not read back', async () => {
    const yaml = 'apiVersion: v1\nkind: Namespace\nmetadata:\n  name: capi-system\n---\n# nothing\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: capi-system}\n';
    const file = join(dir, 'core.yaml');
    await writeFile(file, yaml);
    const cacheDir = join(dir, 'cache');
    const cached = join(cacheDir, 'components', `${createHash('sha256').update(yaml).digest('hex')}.json`);

    const first = await loadComponents('cluster-api', 'capi-system', file, { cacheDir });
    expect(first.objects.map((o) => o.kind)).toEqual(['Namespace', 'ConfigMap']);
    expect(JSON.parse(await readFile(cached, 'utf8'))).toEqual(first.objects);

    // What the cache holds is what a start gets: the YAML is not parsed again.
    await writeFile(cached, JSON.stringify([{ apiVersion: 'v1', kind: 'Secret', metadata: { name: 'from-cache' } }]));
    expect((await loadComponents('cluster-api', 'capi-system', file, { cacheDir })).objects.map((o) => o.metadata.name)).toEqual(['from-cache']);

    await writeFile(cached, '{"cut sh');
    expect((await loadComponents('cluster-api', 'capi-system', file, { cacheDir })).objects).toEqual(first.objects);
    expect(JSON.parse(await readFile(cached, 'utf8'))).toEqual(first.objects);
  });

  it('parses without a cache it can write', async () => {
    const file = join(dir, 'one.yaml');
    await writeFile(file, 'apiVersion: v1\nkind: Namespace\nmetadata:\n  name: one\n');
    await writeFile(join(dir, 'not-a-dir'), '');
    expect((await loadComponents('p', 'one', file, { cacheDir: join(dir, 'not-a-dir') })).objects.map((o) => o.metadata.name)).toEqual(['one']);
  });
});

describe('namesAcceptedNotEstablished', () => {
  const crd = (name: string, conditions: Record<string, string>) => ({
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name },
    status: { conditions: Object.entries(conditions).map(([type, status]) => ({ type, status })) },
  });

  it('names the CRDs a stopped API server left with names accepted and not Established, among those asked about', () => {
    const crds = [
      crd('stalled.example.dev', { NamesAccepted: 'True', Established: 'False' }),
      crd('done.example.dev', { NamesAccepted: 'True', Established: 'True' }),
      crd('unnamed.example.dev', { NamesAccepted: 'False', Established: 'False' }),
      crd('no-status.example.dev', {}),
      crd('not-ours.example.dev', { NamesAccepted: 'True' }),
    ];
    const asked = ['stalled.example.dev', 'done.example.dev', 'unnamed.example.dev', 'no-status.example.dev', 'absent.example.dev'];
    expect(namesAcceptedNotEstablished(crds, asked)).toEqual(['stalled.example.dev']);
  });
});

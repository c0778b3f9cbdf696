/**
 * The push protocol against a local node http server that keeps blobs and manifests in memory
 * the way the distribution spec says a registry does (HEAD 200/404, POST 202 + Location, PUT
 * ?digest= 201, manifests by reference), with Basic or Bearer challenges when asked. The real
 * registry is test/integration/management-install-registry.test.ts's.
 */
import { createHash } from 'node:crypto';
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import http from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError, ExternalError, UsageError } from '../errors.js';
import { writeImageArchive } from '../nodeartifacts/oci-image.js';
import { createCertificateAuthority, issueCertificate } from '../pki/index.js';
import { readRegistryAuth } from './auth.js';
import { RegistryClient } from './client.js';
import { pushArchiveImage } from './push.js';
import { parseImageRegistry, targetImageRef } from './reference.js';

interface Double {
  port: number;
  blobs: Map<string, Buffer>;
  manifests: Map<string, { type: string; body: Buffer }>;
  requests: string[];
  auth: 'none' | 'basic' | 'bearer';
  denyUploads: boolean;
  close(): Promise<void>;
}

const user = { username: 'pusher', password: 'pw-0000' };
const basicHeader = `Basic ${Buffer.from('pusher:pw-0000').toString('base64')}`;

async function startDouble(): Promise<Double> {
  const state = { blobs: new Map<string, Buffer>(), manifests: new Map<string, { type: string; body: Buffer }>(), requests: [] as string[], auth: 'none' as Double['auth'], denyUploads: false };
  let uploads = 0;
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const url = new URL(req.url ?? '/', 'http://x');
      state.requests.push(`${req.method} ${url.pathname}`);
      const body = Buffer.concat(chunks);
      if (url.pathname === '/token') {
        const ok = req.headers.authorization === basicHeader && url.searchParams.get('service') === 'double';
        res.writeHead(ok ? 200 : 401, { 'content-type': 'application/json' }).end(ok ? JSON.stringify({ token: `t-${url.searchParams.get('scope')}` }) : '{}');
        return;
      }
      const authorized = state.auth === 'none' || (state.auth === 'basic' && req.headers.authorization === basicHeader) || (state.auth === 'bearer' && /^Bearer t-/.test(req.headers.authorization ?? ''));
      if (!authorized) {
        const challenge = state.auth === 'basic' ? 'Basic realm="double"' : `Bearer realm="http://127.0.0.1:${(server.address() as AddressInfo).port}/token",service="double"`;
        res.writeHead(401, { 'www-authenticate': challenge, 'content-type': 'application/json' }).end(JSON.stringify({ errors: [{ code: 'UNAUTHORIZED', message: 'authentication required' }] }));
        return;
      }
      if (url.pathname === '/v2/') return void res.writeHead(200).end('{}');
      const blob = /^\/v2\/(.+)\/blobs\/(sha256:[0-9a-f]{64})$/.exec(url.pathname);
      if (blob && req.method === 'HEAD') return void res.writeHead(state.blobs.has(blob[2]!) ? 200 : 404).end();
      if (/^\/v2\/(.+)\/blobs\/uploads\/$/.test(url.pathname) && req.method === 'POST') {
        if (state.denyUploads) return void res.writeHead(403, { 'content-type': 'application/json' }).end(JSON.stringify({ errors: [{ code: 'DENIED', message: 'requested access to the resource is denied' }] }));
        return void res.writeHead(202, { location: `/v2/upload/${++uploads}?state=abc` }).end();
      }
      if (/^\/v2\/upload\/\d+$/.test(url.pathname) && req.method === 'PUT') {
        const digest = url.searchParams.get('digest') ?? '';
        if (`sha256:${createHash('sha256').update(body).digest('hex')}` !== digest || url.searchParams.get('state') !== 'abc') return void res.writeHead(400).end();
        state.blobs.set(digest, body);
        return void res.writeHead(201).end();
      }
      const manifest = /^\/v2\/(.+)\/manifests\/([^/]+)$/.exec(url.pathname);
      if (manifest && req.method === 'PUT') {
        const digest = `sha256:${createHash('sha256').update(body).digest('hex')}`;
        state.manifests.set(`${manifest[1]}:${manifest[2]}`, { type: req.headers['content-type'] ?? '', body });
        return void res.writeHead(201, { 'docker-content-digest': digest }).end();
      }
      res.writeHead(404).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return Object.assign(state, {
    port: (server.address() as AddressInfo).port,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  });
}

describe('parseImageRegistry', () => {
  it('reads host[:port][/path], plain HTTP for loopback only', () => {
    expect(parseImageRegistry('127.0.0.1:5000/provisioner')).toMatchObject({ host: '127.0.0.1:5000', path: 'provisioner', scheme: 'http', loopback: true });
    expect(parseImageRegistry('registry.example.com/team/infra/')).toMatchObject({ host: 'registry.example.com', path: 'team/infra', scheme: 'https', loopback: false });
    expect(parseImageRegistry('https://localhost:5443')).toMatchObject({ host: 'localhost:5443', path: '', scheme: 'https', loopback: true });
    expect(targetImageRef(parseImageRegistry('[::1]:5000/p'), 'capi-manager', 'v1', 'sha256:ab')).toBe('[::1]:5000/p/capi-manager:v1@sha256:ab');
  });

  it('refuses what is no registry, naming the field and the fix', () => {
    for (const [text, why] of [
      ['http://registry.example.com', /loopback registry only/],
      ['myregistry/provisioner', /Docker Hub account/],
      ['registry.example.com/Team', /not a repository name/],
      ['registry.example.com:70000', /between 1 and 65535/],
      ['ftp://registry.example.com', /scheme ftp/],
      ['', /no host/],
    ] as const) {
      expect(() => parseImageRegistry(text), text).toThrow(why);
      expect(() => parseImageRegistry(text)).toThrow(UsageError);
    }
  });
});

describe('pushing an archive', () => {
  let dir: string;
  let archive: string;
  let manifestDigest: string;
  let registry: Double;

  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'provisioner-push-'));
    await writeFile(path.join(dir, 'tool'), Buffer.alloc(200_000, 7), { mode: 0o755 });
    archive = path.join(dir, 'tool.tar');
    manifestDigest = (await writeImageArchive({ name: 'tool', binaryPath: path.join(dir, 'tool'), refs: ['provisioner.local/tool:v1'], os: 'linux', architecture: 'amd64' }, archive)).manifestDigest;
    registry = await startDouble();
  });
  afterAll(async () => {
    await registry?.close();
    await rm(dir, { recursive: true, force: true });
  });

  const push = async (options: { credentials?: typeof user } = {}) => {
    const client = await RegistryClient.open({ target: parseImageRegistry(`127.0.0.1:${registry.port}/p`), ...options });
    try {
      await client.check();
      return await pushArchiveImage(client, archive, { sourceRef: 'provisioner.local/tool:v1', repository: 'p/tool', tag: 'v1' });
    } finally {
      client.close();
    }
  };

  it('uploads the config and the layer, then the manifest by tag; a second push uploads nothing', async () => {
    // A registry that has none of it, whichever test of this file ran before.
    registry.blobs.clear();
    registry.manifests.clear();
    const first = await push();
    expect(first.digest).toBe(manifestDigest);
    expect(first.blobs).toHaveLength(2);
    expect(first.blobs.every((b) => b.uploaded)).toBe(true);
    const stored = registry.manifests.get('p/tool:v1');
    expect(stored?.type).toBe('application/vnd.oci.image.manifest.v1+json');
    expect(`sha256:${createHash('sha256').update(stored!.body).digest('hex')}`).toBe(manifestDigest);
    for (const b of first.blobs) expect(registry.blobs.get(b.digest)?.length).toBe(b.size);
    registry.requests.length = 0;
    const second = await push();
    expect(second.blobs.map((b) => b.uploaded)).toEqual([false, false]);
    expect(registry.requests.filter((r) => r.startsWith('POST') || r.startsWith('PUT /v2/upload'))).toEqual([]);
  });

  it('asks for the auth file when the registry challenges and none was given', async () => {
    registry.auth = 'basic';
    try {
      const error = await push().catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ExternalError);
      expect((error as ExternalError).message).toMatch(new RegExp(`Registry 127\\.0\\.0\\.1:${registry.port} asks for credentials \\(401\\)`));
      expect((error as ExternalError).hint).toContain('\u2039imageRegistryAuthFile\u203a');
      expect((error as ExternalError).details).toContain('UNAUTHORIZED: authentication required');
    } finally {
      registry.auth = 'none';
    }
  });

  it('answers a Basic challenge with the credentials, and a Bearer one with a token from the realm', async () => {
    for (const auth of ['basic', 'bearer'] as const) {
      registry.auth = auth;
      try {
        expect((await push({ credentials: user })).digest, auth).toBe(manifestDigest);
        const wrong = await push({ credentials: { username: 'pusher', password: 'nope' } }).catch((e: unknown) => e);
        expect((wrong as Error).message, auth).toMatch(/refused the credentials \(401\)/);
        expect((wrong as Error).message).not.toContain('nope');
      } finally {
        registry.auth = 'none';
      }
    }
  });

  it('names the registry, the repository and the status when an upload is denied', async () => {
    const fresh = await startDouble();
    fresh.denyUploads = true;
    try {
      const client = await RegistryClient.open({ target: parseImageRegistry(`127.0.0.1:${fresh.port}`) });
      const error = await pushArchiveImage(client, archive, { sourceRef: 'provisioner.local/tool:v1', repository: 'tool', tag: 'v1' }).catch((e: unknown) => e);
      client.close();
      expect((error as Error).message).toBe(`Registry 127.0.0.1:${fresh.port} (repository tool) answered 403 to the upload of blob ${(error as ExternalError).message.match(/sha256:[0-9a-f]{64}/)?.[0]} (POST, expected 202 with a Location)`);
      expect((error as ExternalError).hint).toMatch(/grant the user push rights on tool/);
    } finally {
      await fresh.close();
    }
  });

  it('says the registry cannot be reached, with the flag to check', async () => {
    const closed = await startDouble();
    await closed.close();
    const client = await RegistryClient.open({ target: parseImageRegistry(`127.0.0.1:${closed.port}`) });
    const error = await client.check().catch((e: unknown) => e);
    client.close();
    expect((error as Error).message).toMatch(new RegExp(`Registry 127\\.0\\.0\\.1:${closed.port} could not be reached for the API check .*ECONNREFUSED`));
    expect((error as ExternalError).hint).toContain('\u2039imageRegistry\u203a');
  });
});

describe('a registry over HTTPS', () => {
  it('trusts a private CA given by file, and without it names the CA file option', async () => {
    const ca = await createCertificateAuthority({ commonName: 'registry test CA' });
    const serving = await issueCertificate(ca, { commonName: 'registry', ipAddresses: ['127.0.0.1'], usages: 'server' });
    const server = https.createServer({ cert: serving.certPem, key: serving.keyPem }, (_req, res) => res.writeHead(200).end('{}'));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const dir = await mkdtemp(path.join(os.tmpdir(), 'provisioner-ca-'));
    try {
      const caFile = path.join(dir, 'ca.pem');
      await writeFile(caFile, ca.certPem);
      const target = parseImageRegistry(`https://127.0.0.1:${(server.address() as AddressInfo).port}`);
      const trusting = await RegistryClient.open({ target, caFile });
      await expect(trusting.check()).resolves.toBeUndefined();
      trusting.close();
      const untrusting = await RegistryClient.open({ target });
      const error = await untrusting.check().catch((e: unknown) => e);
      untrusting.close();
      expect(error).toBeInstanceOf(ExternalError);
      expect((error as ExternalError).message).toMatch(/could not be reached for the API check/);
      expect((error as ExternalError).hint).toMatch(/certificate is not trusted: give the CA that signed it with \u2039imageRegistryCaFile\u203a/);
      await expect(RegistryClient.open({ target, caFile: path.join(dir, 'absent.pem') })).rejects.toThrow(ConfigError);
    } finally {
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('readRegistryAuth', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'provisioner-auth-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("finds the host's auths entry by host[:port], whatever scheme or path its key has, and warns of a file others may read", async () => {
    const file = path.join(dir, 'config.json');
    await writeFile(file, JSON.stringify({ auths: { 'https://registry.example:5000/v1/': { auth: Buffer.from('u:p:w').toString('base64') }, 'other.example': { username: 'a', password: 'b' } } }), { mode: 0o600 });
    await chmod(file, 0o600);
    expect(await readRegistryAuth(file, 'registry.example:5000')).toEqual({ credentials: { username: 'u', password: 'p:w' }, warnings: [] });
    expect((await readRegistryAuth(file, 'other.example')).credentials).toEqual({ username: 'a', password: 'b' });
    await chmod(file, 0o644);
    expect((await readRegistryAuth(file, 'other.example')).warnings).toEqual([`${file} is readable by other users (mode 644): run chmod 600 ${file}`]);
  });

  it('names the file and the host when there is no entry, and never a secret', async () => {
    const file = path.join(dir, 'helper.json');
    await writeFile(file, JSON.stringify({ credsStore: 'desktop', auths: { 'x.example': { auth: Buffer.from('u:secret').toString('base64') } } }), { mode: 0o600 });
    const error = await readRegistryAuth(file, 'registry.example').catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as Error).message).toBe(`The registry auth file (\u2039imageRegistryAuthFile\u203a) cannot be used: ${file} has no auths entry for registry.example (it has: x.example)`);
    expect((error as ConfigError).hint).toMatch(/credential helper/);
    expect(JSON.stringify(error)).not.toContain('secret');
  });
});

import { X509Certificate, createPrivateKey, createPublicKey } from 'node:crypto';
import { mkdtemp, readFile, rm, stat, unlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { RecordingSink } from '../../test/support/recording-sink.js';
import { createCertificateAuthority, issueCertificate } from './certificates.js';
import { ensureControlPlanePki, type ControlPlanePki } from './controlplane-pki.js';
import { writeKeyPair, type CertKeyFiles } from './files.js';

const controllers = ['capi', 'kubeadm-bootstrap'];
const everything = ['admin', 'apiserver', 'ca', 'etcd/apiserver-etcd-client', 'etcd/ca', 'etcd/server', 'sa', 'webhooks/capi', 'webhooks/kubeadm-bootstrap'];

async function load(files: CertKeyFiles): Promise<X509Certificate> {
  return new X509Certificate(await readFile(files.certFile, 'utf8'));
}

async function serials(pki: ControlPlanePki): Promise<Record<string, string>> {
  const entries: [string, CertKeyFiles][] = [
    ['ca', pki.ca],
    ['apiserver', pki.apiServer],
    ['admin', pki.admin],
    ['etcd/ca', pki.etcdCa],
    ['etcd/server', pki.etcdServer],
    ['etcd/apiserver-etcd-client', pki.apiServerEtcdClient],
    ...Object.entries(pki.webhooks).map(([name, files]): [string, CertKeyFiles] => [`webhooks/${name}`, files]),
  ];
  const result: Record<string, string> = {};
  for (const [id, files] of entries) result[id] = (await load(files)).serialNumber;
  return result;
}

describe('ensureControlPlanePki', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'pki-cp-'));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('names the listen address in the API server\'s certificate, and reissues only that certificate when it changes', async () => {
    const first = await ensureControlPlanePki(dir, { controllers, apiServerIps: ['198.18.0.1'] });
    expect((await load(first.apiServer)).subjectAltName).toMatch(/, IP Address:198\.18\.0\.1$/);
    expect((await ensureControlPlanePki(dir, { controllers, apiServerIps: ['198.18.0.1'] })).generated).toEqual([]);
    const moved = await ensureControlPlanePki(dir, { controllers, apiServerIps: ['198.18.0.7'] });
    expect(moved.generated).toEqual(['apiserver']);
    expect((await load(moved.apiServer)).checkIP('198.18.0.7')).toBe('198.18.0.7');
  });

  it('creates every cert, each verifying against its CA with the right names and usages', async () => {
    const sink = new RecordingSink();
    const pki = await ensureControlPlanePki(dir, { controllers, events: sink });
    expect(pki.generated).toEqual(everything);
    expect(sink.ofType('log').map((e) => e.message)).toContain('Generated etcd/server');

    const ca = await load(pki.ca);
    const etcdCa = await load(pki.etcdCa);
    expect(pki.caCertPem).toBe(await readFile(pki.ca.certFile, 'utf8'));
    expect(ca.ca && etcdCa.ca).toBe(true);
    expect(ca.subject).not.toBe(etcdCa.subject);

    const apiServer = await load(pki.apiServer);
    expect(apiServer.verify(ca.publicKey)).toBe(true);
    expect(apiServer.subjectAltName).toBe(
      'DNS:localhost, DNS:kubernetes, DNS:kubernetes.default, DNS:kubernetes.default.svc, IP Address:127.0.0.1, IP Address:0:0:0:0:0:0:0:1',
    );
    expect(apiServer.keyUsage).toEqual(['1.3.6.1.5.5.7.3.1']);

    const admin = await load(pki.admin);
    expect(admin.verify(ca.publicKey)).toBe(true);
    expect(admin.subject).toBe('O=system:masters\nCN=provisioner-admin');
    expect(admin.keyUsage).toEqual(['1.3.6.1.5.5.7.3.2']);

    const etcdServer = await load(pki.etcdServer);
    expect(etcdServer.verify(etcdCa.publicKey)).toBe(true);
    expect(etcdServer.verify(ca.publicKey)).toBe(false);
    expect(etcdServer.checkIP('127.0.0.1')).toBe('127.0.0.1');
    expect(etcdServer.checkIP('::1')).toBe('::1');
    expect(etcdServer.checkHost('localhost')).toBe('localhost');
    const etcdClient = await load(pki.apiServerEtcdClient);
    expect(etcdClient.verify(etcdCa.publicKey)).toBe(true);
    expect(etcdClient.keyUsage).toEqual(['1.3.6.1.5.5.7.3.2']);

    expect(Object.keys(pki.webhooks).sort()).toEqual(controllers);
    const capi = pki.webhooks.capi;
    expect(capi).toEqual({ certDir: join(dir, 'webhooks', 'capi'), certFile: join(dir, 'webhooks', 'capi', 'tls.crt'), keyFile: join(dir, 'webhooks', 'capi', 'tls.key') });
    const webhook = await load(capi!);
    expect(webhook.verify(ca.publicKey)).toBe(true);
    expect(webhook.subjectAltName).toBe('DNS:localhost, IP Address:127.0.0.1, IP Address:0:0:0:0:0:0:0:1');

    const saPrivate = createPrivateKey(await readFile(pki.serviceAccount.privateKeyFile, 'utf8'));
    const saPublic = createPublicKey(await readFile(pki.serviceAccount.publicKeyFile, 'utf8'));
    expect(createPublicKey(saPrivate).export({ type: 'spki', format: 'pem' })).toBe(saPublic.export({ type: 'spki', format: 'pem' }));

    const keyFiles = [pki.ca, pki.apiServer, pki.admin, pki.etcdCa, pki.etcdServer, pki.apiServerEtcdClient, capi!].map((f) => f.keyFile);
    for (const file of [...keyFiles, pki.serviceAccount.privateKeyFile]) expect((await stat(file)).mode & 0o777, file).toBe(0o600);
    expect((await stat(pki.apiServer.certFile)).mode & 0o777).toBe(0o644);
    expect((await stat(join(dir, 'webhooks'))).mode & 0o777).toBe(0o700);
  }, 60_000);

  it('reuses everything on a second call (same serials) and adds a new controller only', async () => {
    const first = await ensureControlPlanePki(dir, { controllers });
    const second = await ensureControlPlanePki(dir, { controllers });
    expect(second.generated).toEqual([]);
    expect(await serials(second)).toEqual(await serials(first));
    expect(await readFile(second.serviceAccount.privateKeyFile, 'utf8')).toBe(await readFile(first.serviceAccount.privateKeyFile, 'utf8'));

    const third = await ensureControlPlanePki(dir, { controllers: [...controllers, 'docker-infra'] });
    expect(third.generated).toEqual(['webhooks/docker-infra']);
  }, 60_000);

  it('regenerates leaf certs that expire within 24 h and keeps the CAs', async () => {
    const first = await ensureControlPlanePki(dir, { controllers: ['capi'], leafValidityDays: 2 });
    const before = await serials(first);
    // 25 h later the 2-day leaves have < 24 h left; the 10-year CAs are fine.
    const later = new Date(Date.now() + 25 * 60 * 60 * 1000);
    const second = await ensureControlPlanePki(dir, { controllers: ['capi'], leafValidityDays: 2, now: later });
    expect(second.generated).toEqual(['admin', 'apiserver', 'etcd/apiserver-etcd-client', 'etcd/server', 'webhooks/capi']);
    const after = await serials(second);
    expect(after.ca).toBe(before.ca);
    expect(after['etcd/ca']).toBe(before['etcd/ca']);
    expect(after.apiserver).not.toBe(before.apiserver);
  }, 60_000);

  it('regenerates a single expiring cert written by someone else', async () => {
    const first = await ensureControlPlanePki(dir, { controllers: [] });
    const ca = { certPem: await readFile(first.ca.certFile, 'utf8'), keyPem: await readFile(first.ca.keyFile, 'utf8') };
    const shortLived = await issueCertificate(ca, { commonName: 'provisioner-admin', organizations: ['system:masters'], usages: 'client', validityDays: 0.5 });
    await writeKeyPair(dir, 'admin', shortLived);
    const second = await ensureControlPlanePki(dir, { controllers: [] });
    expect(second.generated).toEqual(['admin']);
    expect((await load(second.admin)).serialNumber).not.toBe(new X509Certificate(shortLived.certPem).serialNumber);
  }, 60_000);

  it('regenerates missing, tampered and mismatched files', async () => {
    const first = await ensureControlPlanePki(dir, { controllers: ['capi'] });
    const before = await serials(first);
    await unlink(first.webhooks.capi!.keyFile);
    await writeFile(first.apiServer.certFile, 'not a certificate');
    await writeFile(first.serviceAccount.publicKeyFile, (await readFile(first.ca.certFile, 'utf8')).replace('CERTIFICATE', 'PUBLIC KEY'));
    // The admin key replaced by another valid key: cert and key no longer match.
    await writeFile(first.admin.keyFile, await readFile(first.etcdServer.keyFile, 'utf8'));
    const second = await ensureControlPlanePki(dir, { controllers: ['capi'] });
    expect(second.generated).toEqual(['admin', 'apiserver', 'sa', 'webhooks/capi']);
    const after = await serials(second);
    expect(after.ca).toBe(before.ca);
    expect(after['etcd/server']).toBe(before['etcd/server']);
    expect((await stat(second.webhooks.capi!.keyFile)).mode & 0o777).toBe(0o600);
  }, 60_000);

  it('reissues the certs that a replaced CA did not sign', async () => {
    await ensureControlPlanePki(dir, { controllers: ['capi'] });
    await writeKeyPair(join(dir, 'etcd'), 'ca', await createCertificateAuthority({ commonName: 'impostor' }));
    const second = await ensureControlPlanePki(dir, { controllers: ['capi'] });
    // The impostor is a valid CA, so it is kept; what it did not sign is reissued.
    expect(second.generated).toEqual(['etcd/apiserver-etcd-client', 'etcd/server']);
    expect((await load(second.etcdServer)).verify((await load(second.etcdCa)).publicKey)).toBe(true);
  }, 60_000);

  it('refuses a controller name that is not a plain directory name', async () => {
    await expect(ensureControlPlanePki(dir, { controllers: ['../escape'] })).rejects.toThrow(/cannot be a directory name/);
  });
});

import { spawnSync } from 'node:child_process';
import { X509Certificate, createPrivateKey, generateKeyPairSync } from 'node:crypto';
import { mkdtemp, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import forge from 'node-forge';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { certificateProblem, createCertificateAuthority, issueCertificate, type CertificateAndKey } from './certificates.js';
import { readKeyPair, writeKeyPair } from './files.js';
import { generateServiceAccountKeyPair, isPublicKeyOf, publicKeyPemOf } from './keys.js';

const serverAuth = '1.3.6.1.5.5.7.3.1';
const clientAuth = '1.3.6.1.5.5.7.3.2';

describe('certificates', () => {
  let ca: CertificateAndKey;
  let otherCa: CertificateAndKey;
  beforeAll(async () => {
    [ca, otherCa] = await Promise.all([
      createCertificateAuthority({ commonName: 'test-ca', validityDays: 30 }),
      createCertificateAuthority({ commonName: 'other-ca' }),
    ]);
  }, 60_000);

  it('creates a self-signed CA valid for the requested days', () => {
    const cert = new X509Certificate(ca.certPem);
    expect(cert.ca).toBe(true);
    expect(cert.subject).toBe('CN=test-ca');
    expect(cert.verify(cert.publicKey)).toBe(true);
    const days = (new Date(cert.validTo).getTime() - Date.now()) / 86_400_000;
    expect(days).toBeGreaterThan(29.9);
    expect(days).toBeLessThan(30.1);
    expect(createPrivateKey(ca.keyPem).asymmetricKeyDetails?.namedCurve).toBe('prime256v1');
    expect(cert.publicKey.asymmetricKeyType).toBe('ec');
  });

  it('makes certificates OpenSSL verifies as a chain, the key identifiers linking leaf to CA', async () => {
    const leaf = await issueCertificate(ca, { commonName: 'etcd', dnsNames: ['localhost'], ipAddresses: ['127.0.0.1'], usages: 'both' });
    const dir = await mkdtemp(join(tmpdir(), 'pki-chain-'));
    try {
      await writeFile(join(dir, 'ca.crt'), ca.certPem);
      await writeFile(join(dir, 'leaf.crt'), leaf.certPem);
      const verify = spawnSync('openssl', ['verify', '-x509_strict', '-purpose', 'sslserver', '-CAfile', join(dir, 'ca.crt'), join(dir, 'leaf.crt')], { encoding: 'utf8' });
      expect(verify.stdout + verify.stderr).toContain(': OK');
      const text = (file: string) => spawnSync('openssl', ['x509', '-noout', '-text', '-in', join(dir, file)], { encoding: 'utf8' }).stdout;
      const caKeyId = /Subject Key Identifier:\s*\n\s*([0-9A-F:]+)/.exec(text('ca.crt'))?.[1];
      expect(caKeyId).toMatch(/^[0-9A-F]{2}(:[0-9A-F]{2}){19}$/);
      expect(text('leaf.crt')).toMatch(new RegExp(`Authority Key Identifier:\\s*\\n\\s*(keyid:)?${caKeyId}`));
      expect(text('leaf.crt')).toContain('ecdsa-with-SHA256');
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('issues from an RSA CA an earlier version made (sha256WithRSAEncryption over an ECDSA key)', async () => {
    const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 });
    const rsaCert = forge.pki.createCertificate();
    rsaCert.publicKey = forge.pki.publicKeyFromPem(rsa.publicKey.export({ type: 'spki', format: 'pem' }).toString());
    rsaCert.serialNumber = '01';
    rsaCert.validity.notBefore = new Date(Date.now() - 60_000);
    rsaCert.validity.notAfter = new Date(Date.now() + 86_400_000);
    rsaCert.setSubject([{ shortName: 'CN', value: 'old-rsa-ca' }]);
    rsaCert.setIssuer([{ shortName: 'CN', value: 'old-rsa-ca' }]);
    rsaCert.setExtensions([{ name: 'basicConstraints', cA: true, critical: true }, { name: 'keyUsage', critical: true, keyCertSign: true }, { name: 'subjectKeyIdentifier' }]);
    const keyPem = rsa.privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
    rsaCert.sign(forge.pki.privateKeyFromPem(keyPem), forge.md.sha256.create());
    const oldCa = { certPem: forge.pki.certificateToPem(rsaCert), keyPem };
    const leaf = await issueCertificate(oldCa, { commonName: 'kube-apiserver', dnsNames: ['localhost'], usages: 'server' });
    const cert = new X509Certificate(leaf.certPem);
    expect(cert.issuer).toBe('CN=old-rsa-ca');
    expect(cert.verify(new X509Certificate(oldCa.certPem).publicKey)).toBe(true);
    expect(certificateProblem(leaf, { issuerCertPem: oldCa.certPem, usages: 'server' })).toBeUndefined();
  });

  it('issues a server cert with SANs that verifies against its CA only', async () => {
    const leaf = await issueCertificate(ca, {
      commonName: 'kube-apiserver',
      dnsNames: ['localhost', 'kubernetes.default.svc'],
      ipAddresses: ['127.0.0.1', '::1'],
      usages: 'server',
    });
    const cert = new X509Certificate(leaf.certPem);
    const caCert = new X509Certificate(ca.certPem);
    expect(cert.ca).toBe(false);
    expect(cert.checkIssued(caCert)).toBe(true);
    expect(cert.verify(caCert.publicKey)).toBe(true);
    expect(cert.verify(new X509Certificate(otherCa.certPem).publicKey)).toBe(false);
    expect(cert.checkPrivateKey(createPrivateKey(leaf.keyPem))).toBe(true);
    expect(cert.subjectAltName).toBe('DNS:localhost, DNS:kubernetes.default.svc, IP Address:127.0.0.1, IP Address:0:0:0:0:0:0:0:1');
    expect(cert.checkIP('::1')).toBe('::1');
    expect(cert.keyUsage).toEqual([serverAuth]);
    expect(certificateProblem(leaf, { issuerCertPem: ca.certPem, usages: 'server', isCa: false })).toBeUndefined();
    expect(certificateProblem(leaf, { issuerCertPem: otherCa.certPem })).toBe('not signed by the expected CA');
    expect(certificateProblem(leaf, { usages: 'client' })).toBe('not usable for TLS client auth');
  });

  it('issues a client cert with organizations as groups', async () => {
    const leaf = await issueCertificate(ca, { commonName: 'provisioner-admin', organizations: ['system:masters'], usages: 'client' });
    const cert = new X509Certificate(leaf.certPem);
    expect(cert.subject).toBe('O=system:masters\nCN=provisioner-admin');
    expect(cert.keyUsage).toEqual([clientAuth]);
    expect(cert.subjectAltName).toBeUndefined();
    expect(certificateProblem(leaf, { commonName: 'provisioner-admin', organizations: ['system:masters'], usages: 'client' })).toBeUndefined();
    expect(certificateProblem(leaf, { organizations: ['system:nodes'] })).toBe('organization system:nodes missing');
  });

  it('gives both usages and unique serials', async () => {
    const [a, b] = await Promise.all([
      issueCertificate(ca, { commonName: 'a', usages: 'both' }),
      issueCertificate(ca, { commonName: 'b', usages: 'both' }),
    ]);
    expect(new X509Certificate(a.certPem).keyUsage?.sort()).toEqual([serverAuth, clientAuth].sort());
    expect(new X509Certificate(a.certPem).serialNumber).not.toBe(new X509Certificate(b.certPem).serialNumber);
  });

  it('reports expiry, a foreign key, missing SANs and garbage', async () => {
    const now = new Date();
    const leaf = await issueCertificate(ca, { commonName: 'x', dnsNames: ['localhost'], usages: 'server', validityDays: 1, now });
    expect(certificateProblem(leaf, { minRemainingMs: 60_000, now })).toBeUndefined();
    expect(certificateProblem(leaf, { minRemainingMs: 2 * 86_400_000, now })).toMatch(/^expires /);
    expect(certificateProblem(leaf, { now: new Date(now.getTime() - 86_400_000) })).toMatch(/^not valid before /);
    expect(certificateProblem({ certPem: leaf.certPem, keyPem: ca.keyPem })).toBe('private key does not match the certificate');
    expect(certificateProblem({ certPem: leaf.certPem, keyPem: 'nope' })).toBe('private key does not parse');
    expect(certificateProblem({ certPem: 'garbage', keyPem: leaf.keyPem })).toBe('certificate does not parse');
    expect(certificateProblem(leaf, { dnsNames: ['kubernetes'] })).toBe('DNS name kubernetes missing');
    expect(certificateProblem(leaf, { ipAddresses: ['127.0.0.1'] })).toBe('IP address 127.0.0.1 missing');
    expect(certificateProblem(leaf, { isCa: true })).toBe('not a CA');
  });

  it('rejects a SAN that is not an IP address', async () => {
    await expect(issueCertificate(ca, { commonName: 'x', ipAddresses: ['localhost'], usages: 'server' })).rejects.toThrow(/Not an IP address/);
  });
});

describe('keys and files', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'pki-files-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('generates a service-account key pair whose halves match', async () => {
    const sa = await generateServiceAccountKeyPair();
    const other = await generateServiceAccountKeyPair();
    expect(sa.privateKeyPem).toMatch(/^-----BEGIN PRIVATE KEY-----/);
    expect(sa.publicKeyPem).toMatch(/^-----BEGIN PUBLIC KEY-----/);
    expect(publicKeyPemOf(sa.privateKeyPem)).toBe(sa.publicKeyPem);
    expect(isPublicKeyOf(sa.publicKeyPem, sa.privateKeyPem)).toBe(true);
    expect(isPublicKeyOf(other.publicKeyPem, sa.privateKeyPem)).toBe(false);
    expect(isPublicKeyOf('junk', sa.privateKeyPem)).toBe(false);
  });

  it('writes key 0600 and cert 0644, and reads them back', async () => {
    const ca = await createCertificateAuthority({ commonName: 'files-ca' });
    const paths = await writeKeyPair(join(dir, 'nested'), 'ca', ca);
    expect(paths).toEqual({ certFile: join(dir, 'nested', 'ca.crt'), keyFile: join(dir, 'nested', 'ca.key') });
    expect((await stat(paths.keyFile)).mode & 0o777).toBe(0o600);
    expect((await stat(paths.certFile)).mode & 0o777).toBe(0o644);
    expect((await stat(join(dir, 'nested'))).mode & 0o777).toBe(0o700);
    expect(await readKeyPair(join(dir, 'nested'), 'ca')).toEqual(ca);
  }, 30_000);
});

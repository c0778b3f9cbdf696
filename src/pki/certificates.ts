/**
 * X.509 certificates: certificate authorities, serving and client certificates, and the checks
 * that decide whether a certificate on disk can be reused.
 *
 * Node cannot build certificates, so node-forge builds the TBSCertificate; everything
 * expensive is native: keys come from `generateRsaKeyPair` (OpenSSL) and the signature is
 * computed by `crypto.sign` over the DER the forge builder produced (forge's own JS RSA
 * signing costs tens of milliseconds per certificate; see scripts/bench/pki.ts).
 * Parsing and verification use Node's `X509Certificate`.
 */
import { X509Certificate, createPrivateKey, randomBytes, sign as nativeSign } from 'node:crypto';
import { isIP } from 'node:net';
import forge from 'node-forge';
import { InternalError } from '../errors.js';
import { generateRsaKeyPair } from './keys.js';

/** A PEM certificate and its PEM private key. A CA is one of these too. */
export interface CertificateAndKey {
  certPem: string;
  keyPem: string;
}

/** What a leaf certificate may be used for: TLS server (serverAuth), client (clientAuth), or both. */
export type CertificateUsage = 'server' | 'client' | 'both';

export interface CertificateAuthorityOptions {
  commonName: string;
  /** Validity in days from now. Default 3650 (10 years): the CA outlives many leaf renewals. */
  validityDays?: number;
  /** Clock for the validity window. Default: the current time. */
  now?: Date;
}

export interface IssueCertificateOptions {
  commonName: string;
  /** Subject O values; Kubernetes reads them as the client's groups (e.g. `system:masters`). */
  organizations?: readonly string[];
  /** DNS subject alternative names. Default none. */
  dnsNames?: readonly string[];
  /** IP subject alternative names (IPv4 or IPv6 literals). Default none. */
  ipAddresses?: readonly string[];
  usages: CertificateUsage;
  /** Validity in days from now. Default 365. */
  validityDays?: number;
  /** Clock for the validity window. Default: the current time. */
  now?: Date;
}

/** Default CA validity in days (10 years). */
export const defaultCaValidityDays = 3650;
/** Default leaf validity in days (1 year). */
export const defaultLeafValidityDays = 365;
/** notBefore is set this far in the past so a slightly slow clock elsewhere still accepts a new cert. */
const clockSkewMs = 5 * 60 * 1000;
const dayMs = 24 * 60 * 60 * 1000;

/** Creates a self-signed CA (basicConstraints cA, keyCertSign + cRLSign) with a fresh 2048-bit key. */
export async function createCertificateAuthority(options: CertificateAuthorityOptions): Promise<CertificateAndKey> {
  const keys = await generateRsaKeyPair();
  const cert = forge.pki.createCertificate();
  cert.publicKey = forge.pki.publicKeyFromPem(keys.publicKeyPem);
  cert.serialNumber = randomSerial();
  setValidity(cert, options.now ?? new Date(), options.validityDays ?? defaultCaValidityDays);
  const subject = [{ shortName: 'CN', value: options.commonName }];
  cert.setSubject(subject);
  cert.setIssuer(subject);
  cert.setExtensions([
    { name: 'basicConstraints', cA: true, critical: true },
    { name: 'keyUsage', critical: true, digitalSignature: true, keyCertSign: true, cRLSign: true },
    { name: 'subjectKeyIdentifier' },
  ]);
  signNatively(cert, keys.privateKeyPem);
  return { certPem: forge.pki.certificateToPem(cert), keyPem: keys.privateKeyPem };
}

/** Issues a leaf certificate signed by `ca`, with a fresh 2048-bit key. */
export async function issueCertificate(ca: CertificateAndKey, options: IssueCertificateOptions): Promise<CertificateAndKey> {
  for (const ip of options.ipAddresses ?? []) {
    if (isIP(ip) === 0) throw new InternalError(`Not an IP address for a certificate SAN: ${ip}`);
  }
  const caCert = forge.pki.certificateFromPem(ca.certPem);
  const keys = await generateRsaKeyPair();
  const cert = forge.pki.createCertificate();
  cert.publicKey = forge.pki.publicKeyFromPem(keys.publicKeyPem);
  cert.serialNumber = randomSerial();
  setValidity(cert, options.now ?? new Date(), options.validityDays ?? defaultLeafValidityDays);
  cert.setSubject([
    ...(options.organizations ?? []).map((o) => ({ shortName: 'O', value: o })),
    { shortName: 'CN', value: options.commonName },
  ]);
  cert.setIssuer(caCert.subject.attributes);

  const altNames = [
    ...(options.dnsNames ?? []).map((value) => ({ type: 2, value })),
    ...(options.ipAddresses ?? []).map((ip) => ({ type: 7, ip })),
  ];
  cert.setExtensions([
    { name: 'basicConstraints', cA: false, critical: true },
    // RSA keys: digitalSignature for (EC)DHE key exchange, keyEncipherment for RSA key transport.
    { name: 'keyUsage', critical: true, digitalSignature: true, keyEncipherment: true },
    {
      name: 'extKeyUsage',
      serverAuth: options.usages !== 'client',
      clientAuth: options.usages !== 'server',
    },
    ...(altNames.length > 0 ? [{ name: 'subjectAltName', altNames }] : []),
    { name: 'subjectKeyIdentifier' },
    { name: 'authorityKeyIdentifier', keyIdentifier: caCert.generateSubjectKeyIdentifier().getBytes() },
  ]);
  signNatively(cert, ca.keyPem);
  return { certPem: forge.pki.certificateToPem(cert), keyPem: keys.privateKeyPem };
}

/**
 * Signs `cert` (sha256WithRSAEncryption) with Node's native RSA. forge's `cert.sign(key, md)`
 * DER-encodes the TBSCertificate, feeds it to `md.update`, then calls `key.sign(md)`; we hand it
 * a digest that records the bytes and a key whose `sign` runs `crypto.sign` over them.
 */
function signNatively(cert: forge.pki.Certificate, signerKeyPem: string): void {
  const signerKey = createPrivateKey(signerKeyPem);
  const chunks: string[] = [];
  const recordingDigest = {
    algorithm: 'sha256',
    update(bytes: string) {
      chunks.push(bytes);
      return recordingDigest;
    },
  };
  const nativeKey = {
    sign: () => nativeSign('sha256', Buffer.from(chunks.join(''), 'binary'), signerKey).toString('binary'),
  };
  // The casts: forge types its parameters as its own key and digest classes; it only uses the
  // members implemented above (md.algorithm, md.update, key.sign).
  cert.sign(nativeKey as unknown as forge.pki.rsa.PrivateKey, recordingDigest as unknown as forge.md.MessageDigest);
}

function setValidity(cert: forge.pki.Certificate, now: Date, validityDays: number): void {
  cert.validity.notBefore = new Date(now.getTime() - clockSkewMs);
  cert.validity.notAfter = new Date(now.getTime() + validityDays * dayMs);
}

/** 128 random bits as a positive DER INTEGER (first byte 0x01..0x7f). */
function randomSerial(): string {
  const bytes = randomBytes(16);
  bytes[0] = ((bytes[0] ?? 0) & 0x7f) | 0x01;
  return bytes.toString('hex');
}

/** What a certificate must satisfy to be reused. Every field is optional; omitted means "not checked". */
export interface CertificateExpectations {
  /** PEM of the CA that must have issued (and signed) it. */
  issuerCertPem?: string;
  commonName?: string;
  /** Every one of these O values must be present. */
  organizations?: readonly string[];
  /** Every one of these must be a DNS SAN. */
  dnsNames?: readonly string[];
  /** Every one of these must be an IP SAN. */
  ipAddresses?: readonly string[];
  usages?: CertificateUsage;
  /** True: must be a CA; false: must not be. */
  isCa?: boolean;
  /** It must stay valid at least this long after `now`. Default 0. */
  minRemainingMs?: number;
  /** Default: the current time. */
  now?: Date;
}

const oidServerAuth = '1.3.6.1.5.5.7.3.1';
const oidClientAuth = '1.3.6.1.5.5.7.3.2';

/**
 * Why `pair` cannot be used as `expect` describes, or undefined when it can. Checks that the
 * cert parses, the key is its key, the issuer signed it, the validity window, the subject, the
 * SANs and the extended key usages.
 */
export function certificateProblem(pair: CertificateAndKey, expect: CertificateExpectations = {}): string | undefined {
  let cert: X509Certificate;
  try {
    cert = new X509Certificate(pair.certPem);
  } catch {
    return 'certificate does not parse';
  }
  try {
    if (!cert.checkPrivateKey(createPrivateKey(pair.keyPem))) return 'private key does not match the certificate';
  } catch {
    return 'private key does not parse';
  }
  if (expect.issuerCertPem !== undefined) {
    let issuer: X509Certificate;
    try {
      issuer = new X509Certificate(expect.issuerCertPem);
    } catch {
      return 'issuer certificate does not parse';
    }
    if (!cert.checkIssued(issuer) || !cert.verify(issuer.publicKey)) return 'not signed by the expected CA';
  }
  const now = (expect.now ?? new Date()).getTime();
  if (new Date(cert.validFrom).getTime() > now) return `not valid before ${cert.validFrom}`;
  const remaining = new Date(cert.validTo).getTime() - now;
  if (remaining <= (expect.minRemainingMs ?? 0)) return `expires ${cert.validTo}`;
  if (expect.isCa !== undefined && cert.ca !== expect.isCa) return expect.isCa ? 'not a CA' : 'unexpectedly a CA';
  const subject = parseSubject(cert.subject);
  if (expect.commonName !== undefined && !subject.CN.includes(expect.commonName)) return `common name is not ${expect.commonName}`;
  for (const o of expect.organizations ?? []) if (!subject.O.includes(o)) return `organization ${o} missing`;
  for (const name of expect.dnsNames ?? []) {
    if (cert.checkHost(name, { subject: 'never', wildcards: false }) === undefined) return `DNS name ${name} missing`;
  }
  for (const ip of expect.ipAddresses ?? []) if (cert.checkIP(ip) === undefined) return `IP address ${ip} missing`;
  if (expect.usages !== undefined) {
    const eku = cert.keyUsage ?? []; // Node names the extended key usages `keyUsage`.
    if (expect.usages !== 'client' && !eku.includes(oidServerAuth)) return 'not usable for TLS server auth';
    if (expect.usages !== 'server' && !eku.includes(oidClientAuth)) return 'not usable for TLS client auth';
  }
  return undefined;
}

/** Node prints the subject as `KEY=value` lines. */
function parseSubject(subject: string): { CN: string[]; O: string[] } {
  const result = { CN: [] as string[], O: [] as string[] };
  for (const line of subject.split('\n')) {
    const eq = line.indexOf('=');
    const key = line.slice(0, eq);
    if (key === 'CN' || key === 'O') result[key].push(line.slice(eq + 1));
  }
  return result;
}

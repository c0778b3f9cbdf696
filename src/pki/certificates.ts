/**
 * X.509 certificates: certificate authorities, serving and client certificates, and the checks
 * that decide whether a certificate on disk can be reused.
 *
 * Node cannot build certificates, so this module DER-encodes the TBSCertificate with
 * node-forge's ASN.1 helpers (subject, extensions) and everything else natively: keys come from
 * `generateKeyPair` (ECDSA P-256, OpenSSL), the SubjectPublicKeyInfo is Node's own encoding, and
 * the signature is `crypto.sign` over the DER. The signing key's type picks the signature
 * algorithm (ecdsa-with-SHA256, or sha256WithRSAEncryption for an RSA CA an earlier version
 * made, which stays in use until it expires). Parsing and verification use Node's
 * `X509Certificate`.
 */
import { X509Certificate, createHash, createPrivateKey, createPublicKey, randomBytes, sign as nativeSign, type KeyObject } from 'node:crypto';
import { isIP } from 'node:net';
import forge from 'node-forge';
import { InternalError } from '../errors.js';
import { generateKeyPair } from './keys.js';

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

/** Creates a self-signed CA (basicConstraints cA, keyCertSign + cRLSign) with a fresh ECDSA P-256 key. */
export async function createCertificateAuthority(options: CertificateAuthorityOptions): Promise<CertificateAndKey> {
  const keys = await generateKeyPair();
  const subject = subjectAsn1([{ shortName: 'CN', value: options.commonName }]);
  const certPem = buildCertificate({
    publicKey: createPublicKey(keys.publicKeyPem),
    subject,
    issuer: subject,
    validity: validity(options.now ?? new Date(), options.validityDays ?? defaultCaValidityDays),
    extensions: [
      { name: 'basicConstraints', cA: true, critical: true },
      { name: 'keyUsage', critical: true, digitalSignature: true, keyCertSign: true, cRLSign: true },
    ],
    signerKey: createPrivateKey(keys.privateKeyPem),
  });
  return { certPem, keyPem: keys.privateKeyPem };
}

/** Issues a leaf certificate signed by `ca`, with a fresh ECDSA P-256 key. */
export async function issueCertificate(ca: CertificateAndKey, options: IssueCertificateOptions): Promise<CertificateAndKey> {
  for (const ip of options.ipAddresses ?? []) {
    if (isIP(ip) === 0) throw new InternalError(`Not an IP address for a certificate SAN: ${ip}`);
  }
  const caCert = new X509Certificate(ca.certPem);
  const keys = await generateKeyPair();
  const altNames = [
    ...(options.dnsNames ?? []).map((value) => ({ type: 2, value })),
    ...(options.ipAddresses ?? []).map((ip) => ({ type: 7, ip })),
  ];
  const certPem = buildCertificate({
    publicKey: createPublicKey(keys.publicKeyPem),
    subject: subjectAsn1([
      ...(options.organizations ?? []).map((o) => ({ shortName: 'O', value: o })),
      { shortName: 'CN', value: options.commonName },
    ]),
    issuer: subjectOf(caCert),
    validity: validity(options.now ?? new Date(), options.validityDays ?? defaultLeafValidityDays),
    extensions: [
      { name: 'basicConstraints', cA: false, critical: true },
      // digitalSignature for (EC)DHE key exchange, keyEncipherment for RSA key transport (as kubeadm sets both).
      { name: 'keyUsage', critical: true, digitalSignature: true, keyEncipherment: true },
      {
        name: 'extKeyUsage',
        serverAuth: options.usages !== 'client',
        clientAuth: options.usages !== 'server',
      },
      ...(altNames.length > 0 ? [{ name: 'subjectAltName', altNames }] : []),
    ],
    authorityKeyId: keyIdentifier(caCert.publicKey),
    signerKey: createPrivateKey(ca.keyPem),
  });
  return { certPem, keyPem: keys.privateKeyPem };
}

const asn1 = forge.asn1;
type Asn1 = forge.asn1.Asn1;
/** ecdsa-with-SHA256 (RFC 5758) and sha256WithRSAEncryption (RFC 4055). */
const ecdsaWithSha256 = '1.2.840.10045.4.3.2';
const sha256WithRsa = '1.2.840.113549.1.1.11';

interface CertificateParts {
  publicKey: KeyObject;
  subject: Asn1;
  issuer: Asn1;
  validity: { notBefore: Date; notAfter: Date };
  /** node-forge extension descriptions (`setExtensions`); the subject key identifier is added. */
  extensions: object[];
  /** The issuer's key identifier; absent for a self-signed CA. */
  authorityKeyId?: Buffer;
  signerKey: KeyObject;
}

/** A v3 certificate, DER-encoded and signed with `signerKey`, as PEM. */
function buildCertificate(parts: CertificateParts): string {
  const algorithm = signatureAlgorithm(parts.signerKey);
  const subjectKeyId = keyIdentifier(parts.publicKey);
  // forge fills each extension's encoding; the key identifiers are given, never derived from a forge (RSA-only) key.
  const holder = forge.pki.createCertificate();
  holder.generateSubjectKeyIdentifier = () => forge.util.createBuffer(subjectKeyId.toString('binary'));
  holder.setExtensions([
    ...parts.extensions,
    { name: 'subjectKeyIdentifier' },
    ...(parts.authorityKeyId ? [{ name: 'authorityKeyIdentifier', keyIdentifier: parts.authorityKeyId.toString('binary') }] : []),
  ]);
  const extensions = (holder.extensions as { id: string; critical?: boolean; value: Asn1 | string }[]).map((e) =>
    seq([
      asn1.create(asn1.Class.UNIVERSAL, asn1.Type.OID, false, asn1.oidToDer(e.id).getBytes()),
      ...(e.critical ? [asn1.create(asn1.Class.UNIVERSAL, asn1.Type.BOOLEAN, false, '\xff')] : []),
      asn1.create(asn1.Class.UNIVERSAL, asn1.Type.OCTETSTRING, false, typeof e.value === 'string' ? e.value : asn1.toDer(e.value).getBytes()),
    ]),
  );
  const tbs = seq([
    asn1.create(asn1.Class.CONTEXT_SPECIFIC, 0, true, [asn1.create(asn1.Class.UNIVERSAL, asn1.Type.INTEGER, false, asn1.integerToDer(2).getBytes())]),
    asn1.create(asn1.Class.UNIVERSAL, asn1.Type.INTEGER, false, randomSerial()),
    algorithm,
    parts.issuer,
    seq([time(parts.validity.notBefore), time(parts.validity.notAfter)]),
    parts.subject,
    asn1.fromDer(parts.publicKey.export({ type: 'spki', format: 'der' }).toString('binary')),
    asn1.create(asn1.Class.CONTEXT_SPECIFIC, 3, true, [seq(extensions)]),
  ]);
  const tbsDer = Buffer.from(asn1.toDer(tbs).getBytes(), 'binary');
  const signature = nativeSign('sha256', tbsDer, parts.signerKey);
  const der = asn1.toDer(seq([tbs, algorithm, asn1.create(asn1.Class.UNIVERSAL, asn1.Type.BITSTRING, false, '\x00' + signature.toString('binary'))])).getBytes();
  return forge.pem.encode({ type: 'CERTIFICATE', body: der });
}

function seq(items: Asn1[]): Asn1 {
  return asn1.create(asn1.Class.UNIVERSAL, asn1.Type.SEQUENCE, true, items);
}

/** The AlgorithmIdentifier of a signature by `key`: ECDSA has no parameters, RSA a NULL. */
function signatureAlgorithm(key: KeyObject): Asn1 {
  const oid = (value: string) => asn1.create(asn1.Class.UNIVERSAL, asn1.Type.OID, false, asn1.oidToDer(value).getBytes());
  switch (key.asymmetricKeyType) {
    case 'ec':
      return seq([oid(ecdsaWithSha256)]);
    case 'rsa':
      return seq([oid(sha256WithRsa), asn1.create(asn1.Class.UNIVERSAL, asn1.Type.NULL, false, '')]);
    default:
      throw new InternalError(`Cannot sign a certificate with a ${key.asymmetricKeyType ?? 'unknown'} key`);
  }
}

/** RFC 5280 4.2.1.2 method 1: the SHA-1 of the subjectPublicKey bits (the EC point, or the RSAPublicKey DER). */
function keyIdentifier(key: KeyObject): Buffer {
  let bits: Buffer;
  if (key.asymmetricKeyType === 'rsa') {
    bits = key.export({ type: 'pkcs1', format: 'der' });
  } else {
    const jwk = key.export({ format: 'jwk' });
    if (jwk.x === undefined || jwk.y === undefined) throw new InternalError(`Cannot name a ${key.asymmetricKeyType ?? 'unknown'} key`);
    bits = Buffer.concat([Buffer.from([0x04]), Buffer.from(jwk.x, 'base64url'), Buffer.from(jwk.y, 'base64url')]);
  }
  return createHash('sha1').update(bits).digest();
}

/** A Name of the attributes given, with forge's string types (PrintableString or UTF8String). */
function subjectAsn1(attributes: { shortName: string; value: string }[]): Asn1 {
  const holder = forge.pki.createCertificate();
  holder.setSubject(attributes);
  return forge.pki.distinguishedNameToAsn1(holder.subject);
}

/** The issuer's subject Name exactly as it is encoded in its certificate (what clients compare). */
function subjectOf(cert: X509Certificate): Asn1 {
  const root = asn1.fromDer(cert.raw.toString('binary')).value;
  const tbs = typeof root === 'string' ? undefined : root[0];
  const subject = tbs === undefined || typeof tbs === 'string' || typeof tbs.value === 'string' ? undefined : tbs.value[5];
  if (subject === undefined || typeof subject === 'string' || typeof subject.value === 'string') throw new InternalError('The CA certificate has no subject to name as issuer');
  return subject;
}

/** UTCTime before 2050, GeneralizedTime from then on (RFC 5280 4.1.2.5). */
function time(date: Date): Asn1 {
  return date.getUTCFullYear() < 2050
    ? asn1.create(asn1.Class.UNIVERSAL, asn1.Type.UTCTIME, false, asn1.dateToUtcTime(date))
    : asn1.create(asn1.Class.UNIVERSAL, asn1.Type.GENERALIZEDTIME, false, asn1.dateToGeneralizedTime(date));
}

function validity(now: Date, validityDays: number): { notBefore: Date; notAfter: Date } {
  return { notBefore: new Date(now.getTime() - clockSkewMs), notAfter: new Date(now.getTime() + validityDays * dayMs) };
}

/** 128 random bits as a positive DER INTEGER (first byte 0x01..0x7f), as the INTEGER's content bytes. */
function randomSerial(): string {
  const bytes = randomBytes(16);
  bytes[0] = ((bytes[0] ?? 0) & 0x7f) | 0x01;
  return bytes.toString('binary');
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

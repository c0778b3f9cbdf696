/**
 * Key generation, native (OpenSSL, on the libuv thread pool, so the event loop stays free).
 * Every key the PKI makes is ECDSA P-256, as kubeadm's `encryptionAlgorithm: ECDSA-P256`:
 * one takes well under a millisecond where a 2048-bit RSA key took about 300 ms of CPU on
 * this project's 2-core machine (scripts/bench/pki.ts), and a local control plane's start
 * makes ten or more. etcd, kube-apiserver (serving, clients, service-account tokens as
 * ES256), controller-runtime webhooks, Node and Go TLS all take them.
 */
import { createPrivateKey, createPublicKey, generateKeyPair as generateNativeKeyPair } from 'node:crypto';
import { promisify } from 'node:util';

const generateKeyPairAsync = promisify(generateNativeKeyPair);

/** The curve of every key the PKI generates. */
const ecCurve = 'P-256';

/** A key pair as PEM: PKCS#8 private key (`BEGIN PRIVATE KEY`), SPKI public key (`BEGIN PUBLIC KEY`). */
export interface KeyPairPem {
  privateKeyPem: string;
  publicKeyPem: string;
}

/** Generates an ECDSA P-256 key pair natively (`ecCurve`). */
export async function generateKeyPair(): Promise<KeyPairPem> {
  const { privateKey, publicKey } = await generateKeyPairAsync('ec', {
    namedCurve: ecCurve,
    publicKeyEncoding: { type: 'spki', format: 'pem' },
    privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
  });
  return { privateKeyPem: privateKey, publicKeyPem: publicKey };
}

/**
 * The service-account key pair kube-apiserver signs and verifies tokens with
 * (`--service-account-signing-key-file` = private, `--service-account-key-file` = public);
 * ECDSA P-256, so its tokens are ES256.
 */
export function generateServiceAccountKeyPair(): Promise<KeyPairPem> {
  return generateKeyPair();
}

/** The SPKI PEM public key of a PEM private key (PKCS#1 or PKCS#8). Throws if it does not parse. */
export function publicKeyPemOf(privateKeyPem: string): string {
  return createPublicKey(createPrivateKey(privateKeyPem)).export({ type: 'spki', format: 'pem' }).toString();
}

/** True when `publicKeyPem` (SPKI or a certificate's key) is the public half of `privateKeyPem`. */
export function isPublicKeyOf(publicKeyPem: string, privateKeyPem: string): boolean {
  try {
    const expected = createPublicKey(createPrivateKey(privateKeyPem)).export({ type: 'spki', format: 'der' });
    const actual = createPublicKey(publicKeyPem).export({ type: 'spki', format: 'der' });
    return expected.equals(actual);
  } catch {
    return false;
  }
}

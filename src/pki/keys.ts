/**
 * Key generation. Node's native RSA keygen (OpenSSL, run on the libuv thread pool, so several
 * keys are generated in parallel and the event loop stays free) is used rather than
 * node-forge's pure-JS keygen: measured by scripts/bench/pki.ts, pure-JS 2048-bit keygen is
 * several times slower and blocks the event loop while it runs.
 */
import { createPrivateKey, createPublicKey, generateKeyPair } from 'node:crypto';
import { promisify } from 'node:util';

const generateKeyPairAsync = promisify(generateKeyPair);

/** RSA modulus size of every key the PKI generates. */
const rsaKeyBits = 2048;

/** A key pair as PEM: PKCS#8 private key (`BEGIN PRIVATE KEY`), SPKI public key (`BEGIN PUBLIC KEY`). */
export interface KeyPairPem {
  privateKeyPem: string;
  publicKeyPem: string;
}

/** Generates an RSA key pair natively. `bits` defaults to 2048 (`rsaKeyBits`). */
export async function generateRsaKeyPair(bits: number = rsaKeyBits): Promise<KeyPairPem> {
  const { privateKey, publicKey } = await generateKeyPairAsync('rsa', {
    modulusLength: bits,
    publicKeyEncoding: { type: 'spki', format: 'pem' },
    privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
  });
  return { privateKeyPem: privateKey, publicKeyPem: publicKey };
}

/**
 * The service-account key pair kube-apiserver signs and verifies tokens with
 * (`--service-account-signing-key-file` = private, `--service-account-key-file` = public).
 */
export function generateServiceAccountKeyPair(): Promise<KeyPairPem> {
  return generateRsaKeyPair();
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

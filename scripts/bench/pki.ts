/**
 * PKI benchmark: why src/pki generates keys natively and signs natively.
 *
 * Figures (medians, milliseconds):
 * - forge pure-JS 2048-bit RSA keygen (`forge.options.usePureJavaScript`) — the baseline;
 * - native async 2048-bit keygen (`crypto.generateKeyPair`, what src/pki uses);
 * - forge JS RSA signing of one certificate vs native signing (`crypto.sign` over forge's TBS);
 * - the whole control-plane PKI set (`ensureControlPlanePki`, 4 controllers) from scratch,
 *   and a second call that reuses everything.
 *
 * Run: `npm run bench -- pki`, or alone: `npx tsx scripts/bench/pki.ts`.
 */
import { generateKeyPair, sign as nativeSign } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import forge from 'node-forge';
import { ensureControlPlanePki } from '../../src/pki/controlplane-pki.js';

const generateKeyPairAsync = promisify(generateKeyPair);

/** Number of timed runs per figure; pure-JS keygen is slow and highly variable, so fewer. */
const runs = { forgeKeygen: 5, nativeKeygen: 9, sign: 15, pkiSet: 3 } as const;
const benchControllers = ['capi', 'kubeadm-bootstrap', 'kubeadm-control-plane', 'infra'];

export interface PkiBenchRecord {
  name: 'pki';
  /** Medians in milliseconds, plus the run counts. */
  figures: Record<string, number>;
  ratios: Record<string, number>;
}

async function median(count: number, task: () => Promise<unknown> | unknown): Promise<number> {
  const times: number[] = [];
  for (let i = 0; i < count; i++) {
    const start = performance.now();
    await task();
    times.push(performance.now() - start);
  }
  times.sort((a, b) => a - b);
  const mid = Math.floor(times.length / 2);
  const value = times.length % 2 === 1 ? times[mid] : ((times[mid - 1] ?? 0) + (times[mid] ?? 0)) / 2;
  return round(value ?? 0);
}

function round(value: number): number {
  return Math.round(value * 10) / 10;
}

/** forge's global options; @types/node-forge does not declare them. */
const forgeOptions = (forge as unknown as { options: { usePureJavaScript: boolean } }).options;

function forgeKeygenPureJs(): void {
  const previous = forgeOptions.usePureJavaScript;
  // Without this flag forge delegates to Node's generateKeyPairSync when it exists.
  forgeOptions.usePureJavaScript = true;
  try {
    forge.pki.rsa.generateKeyPair({ bits: 2048, e: 0x10001 });
  } finally {
    forgeOptions.usePureJavaScript = previous;
  }
}

async function signingFigures(): Promise<{ forgeSignMs: number; nativeSignMs: number }> {
  const { privateKey, publicKey } = await generateKeyPairAsync('rsa', {
    modulusLength: 2048,
    publicKeyEncoding: { type: 'spki', format: 'pem' },
    privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
  });
  const forgeKey = forge.pki.privateKeyFromPem(privateKey);
  const cert = forge.pki.createCertificate();
  cert.publicKey = forge.pki.publicKeyFromPem(publicKey);
  cert.serialNumber = '01';
  cert.validity.notBefore = new Date();
  cert.validity.notAfter = new Date(Date.now() + 86_400_000);
  cert.setSubject([{ shortName: 'CN', value: 'bench' }]);
  cert.setIssuer([{ shortName: 'CN', value: 'bench' }]);
  cert.sign(forgeKey, forge.md.sha256.create()); // fills cert.tbsCertificate, the bytes both signers sign
  const tbsDer = Buffer.from(forge.asn1.toDer(cert.tbsCertificate).getBytes(), 'binary');
  const forgeSignMs = await median(runs.sign, () => cert.sign(forgeKey, forge.md.sha256.create()));
  const nativeSignMs = await median(runs.sign, () => nativeSign('sha256', tbsDer, privateKey));
  return { forgeSignMs, nativeSignMs };
}

export async function run(): Promise<PkiBenchRecord> {
  const forgeKeygenMs = await median(runs.forgeKeygen, forgeKeygenPureJs);
  const nativeKeygenMs = await median(runs.nativeKeygen, () => generateKeyPairAsync('rsa', { modulusLength: 2048 }));
  const { forgeSignMs, nativeSignMs } = await signingFigures();

  const dirs: string[] = [];
  try {
    const pkiSetMs = await median(runs.pkiSet, async () => {
      const dir = await mkdtemp(join(tmpdir(), 'bench-pki-'));
      dirs.push(dir);
      await ensureControlPlanePki(dir, { controllers: benchControllers });
    });
    const lastDir = dirs[dirs.length - 1] ?? '';
    const pkiReuseMs = await median(runs.pkiSet, () => ensureControlPlanePki(lastDir, { controllers: benchControllers }));

    const record: PkiBenchRecord = {
      name: 'pki',
      figures: {
        forgeKeygenMs,
        nativeKeygenMs,
        forgeSignMs,
        nativeSignMs,
        pkiSetMs,
        pkiReuseMs,
        pkiSetItems: 6 + benchControllers.length + 1,
        forgeKeygenRuns: runs.forgeKeygen,
        nativeKeygenRuns: runs.nativeKeygen,
        signRuns: runs.sign,
        pkiSetRuns: runs.pkiSet,
      },
      ratios: {
        forgeKeygenOverNative: round(forgeKeygenMs / nativeKeygenMs),
        forgeSignOverNative: round(forgeSignMs / Math.max(nativeSignMs, 0.1)),
        pkiSetOverOneNativeKey: round(pkiSetMs / nativeKeygenMs),
        pkiReuseOverSet: Math.round((pkiReuseMs / pkiSetMs) * 1000) / 1000,
      },
    };
    printTable(record);
    return record;
  } finally {
    await Promise.all(dirs.map((dir) => rm(dir, { recursive: true, force: true })));
  }
}

function printTable(record: PkiBenchRecord): void {
  const f = record.figures;
  const rows: [string, string][] = [
    ['RSA 2048 keygen, forge pure JS (baseline)', `${f.forgeKeygenMs} ms`],
    ['RSA 2048 keygen, native async', `${f.nativeKeygenMs} ms`],
    ['cert signature, forge JS', `${f.forgeSignMs} ms`],
    ['cert signature, native', `${f.nativeSignMs} ms`],
    [`control-plane PKI set (${f.pkiSetItems} items), new`, `${f.pkiSetMs} ms`],
    ['control-plane PKI set, reused', `${f.pkiReuseMs} ms`],
    ...Object.entries(record.ratios).map(([k, v]): [string, string] => [k, `${v}x`]),
  ];
  const width = Math.max(...rows.map(([label]) => label.length));
  console.log('pki (medians)');
  for (const [label, value] of rows) console.log(`  ${label.padEnd(width)}  ${value}`);
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  await run();
}

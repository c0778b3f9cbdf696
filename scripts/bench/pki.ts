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
 * Run: `npm run bench -- pki` (prints the table, writes bench-results/pki.json), or without
 * writing the record: `npx tsx scripts/bench/pki.ts`.
 */
import { generateKeyPair, sign as nativeSign } from 'node:crypto';
import { createRequire } from 'node:module';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import forge from 'node-forge';
import { ensureControlPlanePki } from '../../src/pki/controlplane-pki.js';
import { describeMachine, formatRecord, median, type BenchRecord } from './record.js';

const generateKeyPairAsync = promisify(generateKeyPair);

/** Number of timed runs per figure; pure-JS keygen is slow and highly variable, so fewer. */
const runs = { forgeKeygen: 5, nativeKeygen: 9, sign: 15, pkiSet: 3 } as const;
const benchControllers = ['capi', 'kubeadm-bootstrap', 'kubeadm-control-plane', 'infra'];

/** Median wall time in ms of `count` sequential runs of `task`. */
async function timeMedian(count: number, task: () => Promise<unknown> | unknown): Promise<number> {
  const times: number[] = [];
  for (let i = 0; i < count; i++) {
    const start = performance.now();
    await task();
    times.push(performance.now() - start);
  }
  return round(median(times));
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
  const forgeSignMs = await timeMedian(runs.sign, () => cert.sign(forgeKey, forge.md.sha256.create()));
  const nativeSignMs = await timeMedian(runs.sign, () => nativeSign('sha256', tbsDer, privateKey));
  return { forgeSignMs, nativeSignMs };
}

export async function run(): Promise<BenchRecord> {
  const forgeKeygenMs = await timeMedian(runs.forgeKeygen, forgeKeygenPureJs);
  const nativeKeygenMs = await timeMedian(runs.nativeKeygen, () => generateKeyPairAsync('rsa', { modulusLength: 2048 }));
  const { forgeSignMs, nativeSignMs } = await signingFigures();

  const dirs: string[] = [];
  try {
    const pkiSetMs = await timeMedian(runs.pkiSet, async () => {
      const dir = await mkdtemp(join(tmpdir(), 'bench-pki-'));
      dirs.push(dir);
      await ensureControlPlanePki(dir, { controllers: benchControllers });
    });
    const lastDir = dirs[dirs.length - 1] ?? '';
    const pkiReuseMs = await timeMedian(runs.pkiSet, () => ensureControlPlanePki(lastDir, { controllers: benchControllers }));

    const items = 6 + benchControllers.length + 1;
    const forgeVersion = (createRequire(import.meta.url)('node-forge/package.json') as { version: string }).version;
    return {
      name: 'pki',
      figures: { forgeKeygenMs, nativeKeygenMs, forgeSignMs, nativeSignMs, pkiSetMs, pkiReuseMs, pkiSetItems: items },
      ratios: {
        forgeKeygenOverNative: round(forgeKeygenMs / nativeKeygenMs),
        forgeSignOverNative: round(forgeSignMs / Math.max(nativeSignMs, 0.1)),
        pkiSetOverOneNativeKey: round(pkiSetMs / nativeKeygenMs),
        pkiReuseOverSet: Math.round((pkiReuseMs / pkiSetMs) * 1000) / 1000,
      },
      versions: { 'node-forge': forgeVersion, openssl: process.versions.openssl },
      tables: [
        {
          title: 'medians',
          columns: ['what', 'runs', 'median ms'],
          rows: [
            ['RSA-2048 keygen, forge pure JS (baseline)', runs.forgeKeygen, forgeKeygenMs],
            ['RSA-2048 keygen, native async (used)', runs.nativeKeygen, nativeKeygenMs],
            ['cert signature, forge JS (baseline)', runs.sign, forgeSignMs],
            ['cert signature, native crypto.sign (used)', runs.sign, nativeSignMs],
            [`control-plane PKI set, ${items} items, new`, runs.pkiSet, pkiSetMs],
            ['control-plane PKI set, all reused', runs.pkiSet, pkiReuseMs],
          ],
        },
      ],
      notes: [
        'forgeKeygenOverNative, forgeSignOverNative: above 1 means native is faster by that factor.',
        'forge keygen without usePureJavaScript already delegates to Node (generateKeyPairSync); the baseline forces pure JS, which also blocks the event loop.',
        'RSA keygen time varies widely per key (prime search); medians of few runs on a shared 2-core machine are rough.',
        `pkiSetOverOneNativeKey: the whole set in units of one native key; the set has ${items} keys, generated concurrently on the libuv pool (4 threads by default), so it depends on free cores.`,
      ],
    };
  } finally {
    await Promise.all(dirs.map((dir) => rm(dir, { recursive: true, force: true })));
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  process.stdout.write(formatRecord(await run(), await describeMachine()));
}

/**
 * The object storage of a local control plane, reached directly: its etcd, through etcd's
 * v3 JSON gateway over HTTPS with the API server's own client certificate (loopback only).
 *
 * One use: a pivot removes the objects it moved out of its own temporary control plane
 * here, once that plane's controllers are stopped (the API server's path would need their
 * webhooks and a finalizer patch plus a delete per object). The API server keeps a watch
 * on these keys, so it sees each removal as a deletion, like any other.
 */
import https from 'node:https';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { ExternalError } from '../errors.js';
import { readPidfiles } from '../process/pidfile.js';
import { loopback } from './components.js';
import { controlPlaneLayout } from './layout.js';
import { etcdName } from './local-controlplane.js';

/** The API server's storage prefix (kube-apiserver's `--etcd-prefix`, which the local control plane leaves at its default). */
const storagePrefix = '/registry';
/**
 * Deletions per etcd transaction: etcd's `--max-txn-ops` default (128), which the local
 * control plane leaves as it is.
 */
const deletionsPerTransaction = 128;
/** Time limit of one gateway request: 30 s (a transaction of 128 deletions takes milliseconds). */
const requestTimeoutMs = 30_000;

/** An object as the API server stores it: its resource (plural) in its group, and its name. */
export interface StoredObjectRef {
  /** Empty for the core group (Secrets, ConfigMaps). */
  group: string;
  /** The resource's plural, e.g. `machines`. */
  resource: string;
  namespace?: string;
  name: string;
}

/**
 * The etcd key of an object: `/registry/<group>/<resource>/[<namespace>/]<name>`, the core
 * group without a group segment (`/registry/secrets/<namespace>/<name>`). This is the layout
 * of the API server's generic registry for core kinds and every custom resource.
 */
export function storageKey(ref: StoredObjectRef): string {
  return [storagePrefix, ...(ref.group ? [ref.group] : []), ref.resource, ...(ref.namespace ? [ref.namespace] : []), ref.name].join('/');
}

interface Gateway {
  request(route: string, body: unknown): Promise<unknown>;
  close(): void;
}

/** The etcd of the control plane of `dir`, as its pidfile records it, with the API server's client certificate. */
async function gatewayOf(dir: string): Promise<Gateway> {
  const layout = controlPlaneLayout(dir);
  const entry = (await readPidfiles(layout.stateDir)).find((e) => e.name === etcdName);
  const port = entry?.ports['client'];
  if (port === undefined) throw new ExternalError(`The local control plane of ${dir} records no running etcd`, { hint: 'Run the command again: it starts the control plane from its data first.' });
  const [ca, cert, key] = await Promise.all(['ca.crt', 'apiserver-etcd-client.crt', 'apiserver-etcd-client.key'].map((f) => readFile(path.join(layout.pkiDir, 'etcd', f), 'utf8')));
  const agent = new https.Agent({ keepAlive: true, maxSockets: 4, ca, cert, key });
  return {
    request: (route, body) =>
      new Promise((resolve, reject) => {
        const payload = JSON.stringify(body);
        const req = https.request({ host: loopback, port, path: route, method: 'POST', agent, timeout: requestTimeoutMs, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) } }, (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => {
            const text = Buffer.concat(chunks).toString('utf8');
            if (res.statusCode !== 200) reject(new ExternalError(`etcd of ${dir} answered ${route} with HTTP ${res.statusCode}: ${text.slice(0, 300)}`));
            else resolve(JSON.parse(text) as unknown);
          });
        });
        req.on('timeout', () => req.destroy(new ExternalError(`etcd of ${dir} did not answer ${route} within ${requestTimeoutMs / 1000} s`)));
        req.on('error', reject);
        req.end(payload);
      }),
    close: () => agent.destroy(),
  };
}

const base64 = (text: string) => Buffer.from(text, 'utf8').toString('base64');

/**
 * Removes `refs` from the storage of the control plane of `dir`, `deletionsPerTransaction`
 * keys per etcd transaction. A key that is already gone counts as removed (a resume).
 * Returns how many keys held an object.
 */
export async function removeStoredObjects(dir: string, refs: readonly StoredObjectRef[]): Promise<number> {
  if (refs.length === 0) return 0;
  const gateway = await gatewayOf(dir);
  let removed = 0;
  try {
    for (let i = 0; i < refs.length; i += deletionsPerTransaction) {
      const batch = refs.slice(i, i + deletionsPerTransaction);
      const answer = (await gateway.request('/v3/kv/txn', { success: batch.map((ref) => ({ request_delete_range: { key: base64(storageKey(ref)) } })) })) as {
        responses?: { response_delete_range?: { deleted?: string } }[];
      };
      for (const response of answer.responses ?? []) removed += Number(response.response_delete_range?.deleted ?? 0);
    }
  } finally {
    gateway.close();
  }
  return removed;
}

/** The keys under `prefix` (`/registry/...`) in the storage of the control plane of `dir`: for tests and diagnosis. */
export async function storedKeys(dir: string, prefix: string): Promise<string[]> {
  const gateway = await gatewayOf(dir);
  // range_end: the prefix with its last byte incremented, etcd's way of saying "every key under it".
  const end = Buffer.from(prefix, 'utf8');
  end[end.length - 1] = end[end.length - 1]! + 1;
  const answer = (await gateway.request('/v3/kv/range', { key: base64(prefix), range_end: end.toString('base64'), keys_only: true }).finally(() => gateway.close())) as { kvs?: { key: string }[] };
  return (answer.kvs ?? []).map((kv) => Buffer.from(kv.key, 'base64').toString('utf8')).sort();
}

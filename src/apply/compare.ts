/**
 * Deciding `patch` or `unchanged` without a write and without a request per object.
 *
 * Choice: compare locally, in two parts, instead of a server-side-apply dry-run per object.
 *  1. The applied hash: every object we apply carries `provisioner.dev/applied-hash`, a
 *     sha256 of exactly what we sent. A different hash means the desired object changed
 *     since the last apply, including a field removed from it, which a plain comparison
 *     with the live object cannot see (the live object still has the field; apply would
 *     remove it). It works as wrangler's `objectset.rio.cattle.io/applied` annotation
 *     does, with a hash in place of the whole object.
 *  2. Drift: every field we set must hold the same value in the live object. Fields others
 *     added (controllers' status, finalizers, owner references, defaults) are ignored; a
 *     field of ours that someone changed or removed is a patch, which puts it back.
 * Why not a dry-run: it costs one request per object (with admission webhooks on the path)
 * for every plan, even when nothing changed, and needs every webhook serving before the
 * plan can even be shown; the local comparison needs only the list calls the prune needs
 * anyway. Its failure mode is benign: a value the server normalizes (a quantity such as
 * `1000m`) reads as drift and produces a no-op patch, never a missed change.
 */
import { createHash } from 'node:crypto';
import type { KubeObject } from '../kube/client.js';

/** Annotation: sha256 (hex) of the object as last applied, without this annotation. */
export const appliedHashKey = 'provisioner.dev/applied-hash';

/** Metadata the server owns: never part of what we send or compare. */
const serverMetadata = new Set(['managedFields', 'resourceVersion', 'uid', 'creationTimestamp', 'generation', 'selfLink', 'deletionTimestamp', 'deletionGracePeriodSeconds']);

/** The object as server-side apply will receive it: no server metadata, no status (a subresource), no hash annotation. */
export function applyContent(obj: KubeObject): KubeObject {
  const metadata: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(obj.metadata)) {
    if (serverMetadata.has(key) || value === undefined) continue;
    if (key === 'annotations' && value && typeof value === 'object') {
      const { [appliedHashKey]: _previous, ...rest } = value as Record<string, string>;
      if (Object.keys(rest).length > 0) metadata.annotations = rest;
      continue;
    }
    metadata[key] = value;
  }
  const { status: _status, metadata: _metadata, apiVersion, kind, ...rest } = obj;
  return { apiVersion, kind, metadata, ...rest } as KubeObject;
}

/** sha256 of the canonical JSON of `applyContent(obj)`. */
export function appliedHash(obj: KubeObject): string {
  return createHash('sha256').update(canonicalJson(applyContent(obj))).digest('hex');
}

/** The object to send: its apply content plus the applied-hash annotation. */
export function withAppliedHash(obj: KubeObject): KubeObject {
  const content = applyContent(obj);
  const hash = appliedHash(obj);
  return { ...content, metadata: { ...content.metadata, annotations: { ...content.metadata.annotations, [appliedHashKey]: hash } } };
}

/** JSON with object keys sorted and undefined dropped, so equal values hash equally. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map((v) => canonicalJson(v ?? null)).join(',')}]`;
  if (value && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>).filter(([, v]) => v !== undefined);
    entries.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

/**
 * Paths (e.g. `spec.replicas`, `metadata.labels["a/b"]`, `spec.items[2]`) where a value
 * we set differs in, or is missing from, the live object; at most `limit` of them.
 * Lists compare whole (same length, each element a subset of its live counterpart):
 * server-side apply replaces atomic lists and merges keyed ones, and either way an
 * element we no longer send shows up as a longer live list.
 */
export function driftPaths(desired: KubeObject, live: KubeObject, limit = 5): string[] {
  const paths: string[] = [];
  const content = applyContent(desired) as unknown as Record<string, unknown>;
  const liveRecord = live as unknown as Record<string, unknown>;
  for (const [key, value] of Object.entries(content)) {
    if (paths.length >= limit) break;
    if (key === 'apiVersion' || key === 'kind') continue; // lists return the version we asked for
    collect(value, liveRecord[key], key, paths, limit);
  }
  return paths;
}

function collect(want: unknown, have: unknown, path: string, out: string[], limit: number): void {
  if (out.length >= limit) return;
  // null in an applied configuration asks for the field to be unset; nothing to hold.
  if (want === null || want === undefined) return;
  if (Array.isArray(want)) {
    if (!Array.isArray(have) || have.length !== want.length) {
      out.push(path);
      return;
    }
    want.forEach((w, i) => collect(w, have[i], `${path}[${i}]`, out, limit));
    return;
  }
  if (typeof want === 'object') {
    if (!have || typeof have !== 'object' || Array.isArray(have)) {
      out.push(path);
      return;
    }
    for (const [key, value] of Object.entries(want as Record<string, unknown>)) {
      collect(value, (have as Record<string, unknown>)[key], joinPath(path, key), out, limit);
    }
    return;
  }
  if (want !== have) out.push(path);
}

function joinPath(path: string, key: string): string {
  return /^[A-Za-z_][A-Za-z0-9_-]*$/.test(key) ? `${path}.${key}` : `${path}[${JSON.stringify(key)}]`;
}

/**
 * The Rancher registration record, `<dir>/.provisioner/rancher.json`: which Rancher the
 * install's cluster was handed to, with which strategy, and the labels that find Rancher's
 * cluster again. Written when a registration starts and after each step, so `destroy
 * cluster` knows what to remove even after an interrupted `register rancher`; a resumed
 * register finds its objects by the same labels (never by a name it would have to remember).
 */
import { mkdir, rm } from 'node:fs/promises';
import path from 'node:path';
import { invalidInput, readJsonFile, type FileKind } from '../../input-files.js';
import { writeFileAtomic } from '../../files.js';
import { rancherStrategies, type RancherStrategy } from './api.js';

/** How Rancher's cluster was made: by us (`import`, the way Turtles does), or by Turtles itself after we labelled the CAPI Cluster (`turtles`). */
export type RancherRegistrationMode = 'import' | 'turtles';

/** Steps of a registration, in order; each is recorded once complete. */
const rancherSteps = ['started', 'cluster', 'token', 'manifest', 'ready'] as const;
export type RancherStep = (typeof rancherSteps)[number];

/** What finds Rancher's cluster: these labels (all of them), in this namespace (v1) and, for a Turtles v1 cluster, owned by this UID. */
export interface RancherClusterQuery {
  strategy: RancherStrategy;
  selector: Record<string, string>;
  /** v1 only: the provisioning cluster's namespace. */
  namespace?: string;
  /** Turtles' v1 cluster carries no owner labels, only an owner reference to the CAPI Cluster: its UID. */
  ownerUid?: string;
}

export interface RancherRegistrationRecord {
  /** Absolute path of Rancher's kubeconfig. */
  rancherKubeconfig: string;
  /** Its API server, to refuse a resume against another Rancher. */
  server: string;
  mode: RancherRegistrationMode;
  query: RancherClusterQuery;
  /** The last step completed. */
  step: RancherStep;
  /** Name of Rancher's cluster once known, for messages only (lookups use `query`). */
  rancherCluster?: string;
}

export function rancherRecordPath(dir: string): string {
  return path.join(path.resolve(dir), '.provisioner', 'rancher.json');
}

/** rancher.json as a file kind: provisioner's own record, a few hundred bytes (at most 64 KiB). */
const recordFile: FileKind = {
  name: 'Rancher registration record',
  maxBytes: 64 * 1024,
  writer: 'provisioner',
  hint: (file) =>
    `it records which Rancher this install was handed to: move ${file} aside and run \`provisioner register rancher\` again with the same --kubeconfig (it finds Rancher's cluster by its labels)`,
};

export async function readRancherRecord(dir: string): Promise<RancherRegistrationRecord | undefined> {
  const file = rancherRecordPath(dir);
  const value = (await readJsonFile(file, recordFile)) as Partial<RancherRegistrationRecord> | null | undefined;
  if (value === undefined) return undefined;
  const problems = [];
  if (typeof value?.rancherKubeconfig !== 'string' || value.rancherKubeconfig === '') problems.push({ path: 'rancherKubeconfig', message: 'expected the path of a kubeconfig' });
  if (typeof value?.server !== 'string') problems.push({ path: 'server', message: 'expected a URL' });
  if (value?.mode !== 'import' && value?.mode !== 'turtles') problems.push({ path: 'mode', message: 'expected import or turtles' });
  const query = value?.query;
  if (!query || !rancherStrategies.includes(query.strategy) || typeof query.selector !== 'object' || query.selector === null) problems.push({ path: 'query', message: 'expected {strategy, selector}' });
  if (!rancherSteps.includes(value?.step as RancherStep)) problems.push({ path: 'step', message: `expected one of ${rancherSteps.join(', ')}` });
  if (problems.length > 0) throw invalidInput(file, recordFile, problems);
  return value as RancherRegistrationRecord;
}

export async function writeRancherRecord(dir: string, record: RancherRegistrationRecord): Promise<void> {
  const file = rancherRecordPath(dir);
  await mkdir(path.dirname(file), { recursive: true });
  await writeFileAtomic(file, JSON.stringify(record, null, 2) + '\n', 0o600);
}

export async function removeRancherRecord(dir: string): Promise<void> {
  await rm(rancherRecordPath(dir), { force: true });
}

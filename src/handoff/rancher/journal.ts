/**
 * The Rancher registration record, `<dir>/.provisioner/rancher.json`: which Rancher the
 * install's cluster was handed to, with which strategy, and the labels that find Rancher's
 * cluster again. Written when a registration starts and after each step, so `destroy
 * cluster` knows what to remove even after an interrupted `register rancher`; a resumed
 * register finds its objects by the same labels (never by a name it would have to remember).
 */
import { InstallRecord } from '../../installdir/record.js';
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

/** rancher.json as a record: a few hundred bytes (at most 64 KiB). */
const rancherRecord = new InstallRecord<RancherRegistrationRecord>({
  record: 'rancher',
  title: 'Rancher registration record',
  maxBytes: 64 * 1024,
  version: 1,
  recovery: (file) =>
    `it records which Rancher this install was handed to: move ${file} aside and run \`provisioner register rancher\` again with the same --kubeconfig (it finds Rancher's cluster by its labels)`,
  problems(value) {
    const problems = [];
    if (typeof value.rancherKubeconfig !== 'string' || value.rancherKubeconfig === '') problems.push({ path: 'rancherKubeconfig', message: 'expected the path of a kubeconfig' });
    if (typeof value.server !== 'string') problems.push({ path: 'server', message: 'expected a URL' });
    if (value.mode !== 'import' && value.mode !== 'turtles') problems.push({ path: 'mode', message: 'expected import or turtles' });
    const query = value.query as Partial<RancherClusterQuery> | undefined;
    if (!query || !rancherStrategies.includes(query.strategy!) || typeof query.selector !== 'object' || query.selector === null) problems.push({ path: 'query', message: 'expected {strategy, selector}' });
    if (!rancherSteps.includes(value.step as RancherStep)) problems.push({ path: 'step', message: `expected one of ${rancherSteps.join(', ')}` });
    return problems;
  },
});

export function rancherRecordPath(dir: string): string {
  return rancherRecord.path(dir);
}

export async function readRancherRecord(dir: string): Promise<RancherRegistrationRecord | undefined> {
  return rancherRecord.read(dir);
}

export async function writeRancherRecord(dir: string, record: RancherRegistrationRecord): Promise<void> {
  await rancherRecord.write(dir, record);
}

export async function removeRancherRecord(dir: string): Promise<void> {
  await rancherRecord.remove(dir);
}

/**
 * management.json: the existing management cluster an install directory uses (recorded by
 * `create cluster --management-kubeconfig` and by a pivot), so later commands (destroy,
 * wait-for, create again) go there instead of to a local control plane.
 */
import path from 'node:path';
import { InstallRecord } from './record.js';

interface ManagementRecord {
  /** Absolute path of the management cluster's kubeconfig. */
  kubeconfig: string;
}

/**
 * A few hundred bytes (at most 64 KiB). Read as "no management cluster" when corrupt, it would
 * send later commands to the local control plane of a cluster that moved away, so it is
 * refused instead.
 */
const managementRecord = new InstallRecord<ManagementRecord>({
  record: 'management',
  title: 'management cluster record',
  maxBytes: 64 * 1024,
  version: 1,
  recovery: (file) =>
    `it names the kubeconfig of the cluster that manages this install: rewrite it as {"kubeconfig": "/absolute/path"}, or pass that kubeconfig again with \`create cluster --management-kubeconfig\` after moving ${file} aside`,
  problems: (record) => (typeof record.kubeconfig !== 'string' || record.kubeconfig === '' ? [{ path: 'kubeconfig', message: 'expected {"kubeconfig": "<path>"}' }] : []),
});

/** Where the existing management cluster of `dir` is recorded. */
export function externalManagementFile(dir: string): string {
  return managementRecord.path(dir);
}

/** The existing management cluster's kubeconfig this install directory uses, if any. */
export async function recordedExternalManagement(dir: string): Promise<string | undefined> {
  return (await managementRecord.read(dir))?.kubeconfig;
}

/** Records the management cluster of this install directory for later commands. */
export async function recordExternalManagement(dir: string, kubeconfig: string): Promise<void> {
  await managementRecord.write(dir, { kubeconfig: path.resolve(kubeconfig) });
}

/** Forgets it: the install is managed locally again (or is gone). */
export async function forgetExternalManagement(dir: string): Promise<void> {
  await managementRecord.remove(dir);
}

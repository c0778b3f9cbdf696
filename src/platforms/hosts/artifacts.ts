/**
 * What hosts download before kubeadm runs: kubelet and kubeadm, and the image archives
 * kubeadm's static pods and the pod sandbox need (built from the bundle's binaries; nothing
 * is pulled). The local control plane serves them (its forwarder, on the listen address);
 * their URLs and digests are known only once it runs, and the machine templates are
 * immutable and named by their spec, so they are not in the manifests: a ConfigMap the
 * provider's HostMachine controller reads lists them, and each bootstrap plan downloads
 * them (content references checked by digest) before it writes the cloud-config's files.
 */
import { InfrastructureError } from '../../errors.js';
import type { KubeClient, KubeObject } from '../../kube/client.js';
import type { ServedArtifact } from '../platform.js';
import { imageArchiveDirectory, loadedArchiveDirectory } from './node-settings.js';

/** Where the provider reads the artifacts list (the agent provider's namespace: one list per management cluster, like its bundle). */
export const artifactsConfigMap = { namespace: 'provisioner-agent-system', name: 'node-artifacts', key: 'artifacts.json' } as const;

/** Where node binaries go on a host (on the PATH the kubelet's supervisor and kubeadm see). */
const binaryDirectory = '/usr/local/bin';

/** One download of a bootstrap plan, as the provider's HostMachine `spec.artifacts` entry. */
export interface HostArtifact {
  path: string;
  url: string;
  digest: string;
  mode: string;
}

/**
 * The served node files as host downloads: `node/bin/<name>` → /usr/local/bin/<name> (0755), `node/images/<name>.tar` → the image archive directory and `node/loaded/<sha256>.tar` (images a user loaded) below it (0644); anything else is not for hosts.
 * `urlOf` says where hosts GET a file. Default: where the local control plane serves it (`ServedArtifact.url`).
 */
export function hostArtifacts(served: readonly ServedArtifact[], urlOf: (artifact: ServedArtifact) => string | undefined = (a) => a.url): HostArtifact[] {
  const out: HostArtifact[] = [];
  for (const artifact of served) {
    const hostPath = hostPathOf(artifact.path);
    if (hostPath === undefined) continue;
    const url = urlOf(artifact);
    if (url === undefined) {
      throw new InfrastructureError(`The local control plane serves ${artifact.path} on no address the hosts reach`, {
        hint: 'Set bootstrap.listenAddress to an address of this machine the hosts reach, then run create cluster again.',
      });
    }
    out.push({ path: hostPath, url, digest: `sha256:${artifact.sha256}`, mode: artifact.path.startsWith('node/bin/') ? '0755' : '0644' });
  }
  return out.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
}

/** Where a served node file lands on a host (see hostArtifacts); undefined: not a file for hosts. */
export function hostPathOf(servedPath: string): string | undefined {
  const binary = /^node\/bin\/([^/]+)$/.exec(servedPath);
  if (binary) return `${binaryDirectory}/${binary[1]}`;
  const image = /^node\/(images|loaded)\/([^/]+\.tar)$/.exec(servedPath);
  if (image) return image[1] === 'images' ? `${imageArchiveDirectory}/${image[2]}` : `${loadedArchiveDirectory}/${image[2]}`;
  return undefined;
}

/** The ConfigMap the provider reads the list from. */
export function artifactsConfigMapObject(artifacts: readonly HostArtifact[]): KubeObject {
  return {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name: artifactsConfigMap.name, namespace: artifactsConfigMap.namespace },
    data: { [artifactsConfigMap.key]: `${JSON.stringify(artifacts, null, 2)}\n` },
  };
}

/**
 * How many files the management cluster's published list names (a self-managed hosts cluster
 * publishes its own); 0 when it publishes none or the list is not a JSON array.
 */
export async function publishedArtifactCount(client: KubeClient): Promise<number> {
  const listed = await client.get<KubeObject & { data?: Record<string, string> }>({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: artifactsConfigMap.name, namespace: artifactsConfigMap.namespace } });
  const text = listed?.data?.[artifactsConfigMap.key];
  if (text === undefined) return 0;
  try {
    const list: unknown = JSON.parse(text);
    return Array.isArray(list) ? list.length : 0;
  } catch {
    return 0;
  }
}

/** Writes the list the provider reads (server-side apply: the same list again changes nothing). */
export async function publishArtifacts(client: KubeClient, artifacts: readonly HostArtifact[]): Promise<void> {
  await client.apply(artifactsConfigMapObject(artifacts));
}

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
import type { KubeClient } from '../../kube/client.js';
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

/** The served node files as host downloads: `node/bin/<name>` → /usr/local/bin/<name> (0755), `node/images/<name>.tar` → the image archive directory and `node/loaded/<sha256>.tar` (images a user loaded) below it (0644); anything else is not for hosts. */
export function hostArtifacts(served: readonly ServedArtifact[]): HostArtifact[] {
  const out: HostArtifact[] = [];
  for (const artifact of served) {
    const binary = /^node\/bin\/([^/]+)$/.exec(artifact.path);
    const image = /^node\/(images|loaded)\/([^/]+\.tar)$/.exec(artifact.path);
    if (!binary && !image) continue;
    if (artifact.url === undefined) {
      throw new InfrastructureError(`The local control plane serves ${artifact.path} on no address the hosts reach`, {
        hint: 'Set bootstrap.listenAddress to an address of this machine the hosts reach, then run create cluster again.',
      });
    }
    out.push({
      path: binary ? `${binaryDirectory}/${binary[1]}` : image![1] === 'images' ? `${imageArchiveDirectory}/${image![2]}` : `${loadedArchiveDirectory}/${image![2]}`,
      url: artifact.url,
      digest: `sha256:${artifact.sha256}`,
      mode: binary ? '0755' : '0644',
    });
  }
  return out.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
}

/** Writes the list the provider reads (server-side apply: the same list again changes nothing). */
export async function publishArtifacts(client: KubeClient, artifacts: readonly HostArtifact[]): Promise<void> {
  await client.apply({
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name: artifactsConfigMap.name, namespace: artifactsConfigMap.namespace },
    data: { [artifactsConfigMap.key]: `${JSON.stringify(artifacts, null, 2)}\n` },
  });
}

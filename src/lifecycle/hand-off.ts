/**
 * The hand-off at the end of `create cluster`: the workload cluster's kubeconfig and the final
 * state of its Cluster API objects, written into the install directory.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { stringify } from 'yaml';
import { writeFileAtomic } from '../files.js';
import { recordPath } from '../installdir/paths.js';
import { KubeApiError, type KubeClient, type KubeObject } from '../kube/client.js';
import type { KindRef } from '../platforms/index.js';
import { clusterKinds } from '../wait/capi.js';
import { workloadKubeconfig } from '../wait/healthy.js';

/** Writes the workload cluster's kubeconfig (0600) and the final state of every CAPI object, with the platform's infrastructure kinds (`lifecycle.stateKinds`). */
export async function handOff(client: KubeClient, dir: string, clusterName: string, namespace: string, platformKinds: readonly KindRef[]): Promise<string> {
  const kubeconfig = path.join(dir, 'auth', 'kubeconfig');
  await mkdir(path.dirname(kubeconfig), { recursive: true, mode: 0o700 });
  await writeFileAtomic(kubeconfig, await workloadKubeconfig(client, clusterName, namespace), 0o600);

  const capiKinds = clusterKinds(namespace);
  const kinds: readonly KindRef[] = [
    ...capiKinds,
    ...platformKinds,
    { apiVersion: 'bootstrap.cluster.x-k8s.io/v1beta2', kind: 'KubeadmConfig' },
    { apiVersion: 'cluster.x-k8s.io/v1beta2', kind: 'MachineSet' },
    // The ClusterClass layout's class (its templates are as the classic layout's, recorded by neither).
    { apiVersion: 'cluster.x-k8s.io/v1beta2', kind: 'ClusterClass' },
  ];
  // Listed together: create cluster's exit waits for the slowest list, not for their sum.
  const lists = await Promise.all(
    kinds.map(({ apiVersion, kind }, index) =>
      client.list(apiVersion, kind, { namespace }).catch((error: unknown) => {
        // A kind beyond Cluster API's own may not be served here (its provider is not installed).
        if (index >= capiKinds.length && error instanceof KubeApiError && error.isNotFound) return [];
        throw error;
      }),
    ),
  );
  const state: KubeObject[] = lists.flat();
  const body = state.map((o) => stringify(stripManagedFields(o), { lineWidth: 0 })).join('---\n');
  await writeFile(recordPath(dir, 'clusterState'), `# Final state of the cluster's Cluster API objects (status included), written by create cluster.\n${body}`, { mode: 0o600 });
  return kubeconfig;
}

function stripManagedFields(obj: KubeObject): KubeObject {
  const { managedFields: _drop, ...metadata } = obj.metadata;
  return { ...obj, metadata };
}

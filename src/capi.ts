/**
 * Cluster API's names, in one place for every layer (platforms, wait, pivot, services):
 * an API group (`cluster.x-k8s.io`) and an apiVersion (`cluster.x-k8s.io/v1beta2`) are
 * different strings, so each has its own constant.
 */

/** Cluster API's API groups. */
export const capiGroups = {
  core: 'cluster.x-k8s.io',
  bootstrap: 'bootstrap.cluster.x-k8s.io',
  controlPlane: 'controlplane.cluster.x-k8s.io',
  infrastructure: 'infrastructure.cluster.x-k8s.io',
} as const;

/** The version of Cluster API's contract provisioner speaks. */
export const capiVersion = 'v1beta2';

/** apiVersion of the core kinds: Cluster, MachineDeployment, MachineSet, Machine. */
export const capiCoreApiVersion = `${capiGroups.core}/${capiVersion}`;
/** apiVersion of KubeadmControlPlane. */
export const kubeadmControlPlaneApiVersion = `${capiGroups.controlPlane}/${capiVersion}`;

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
  addons: 'addons.cluster.x-k8s.io',
} as const;

/** The version of Cluster API's contract provisioner speaks. */
export const capiVersion = 'v1beta2';

/** apiVersion of the core kinds: Cluster, MachineDeployment, MachineSet, Machine. */
export const capiCoreApiVersion = `${capiGroups.core}/${capiVersion}`;
/** apiVersion of KubeadmControlPlane. */
export const kubeadmControlPlaneApiVersion = `${capiGroups.controlPlane}/${capiVersion}`;

/**
 * Label the topology controller puts on every object it creates from a ClusterClass
 * (`clusterv1.ClusterTopologyOwnedLabel`). Its copies of a class's templates keep the
 * template's own labels and annotations, so a copy of a generated template carries our
 * desired-set metadata: this label tells the copy from the template.
 */
export const topologyOwnedLabel = 'topology.cluster.x-k8s.io/owned';

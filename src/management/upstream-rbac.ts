/**
 * The ClusterRole rules each bundled provider's manager needs, as its own source declares them
 * (controller-gen output of its kubebuilder markers):
 *  - cluster-api, bootstrap-kubeadm, control-plane-kubeadm: sigs.k8s.io/cluster-api v1.14.2,
 *    core/config/rbac/role.yaml, bootstrap/kubeadm/config/rbac/role.yaml, controlplane/kubeadm/config/rbac/role.yaml;
 *  - agent-provisioner: provider/config/rbac/role.yaml of this repository.
 * Copied here because the CLI carries no Go module cache; regenerate them (with the script in
 * this file's history: a YAML-to-TS copy) when the bundled Cluster API version changes.
 * src/management/manifests.test.ts checks them against those files where the module cache has them.
 */
import type { PolicyRule } from './manifests.js';

export const upstreamRules: Readonly<Record<string, readonly PolicyRule[]>> = {
  'cluster-api': [
    { apiGroups: [''], resources: ['configmaps'], verbs: ['delete', 'get', 'list', 'patch', 'update', 'watch'] },
    { apiGroups: [''], resources: ['events'], verbs: ['create', 'patch'] },
    { apiGroups: [''], resources: ['namespaces'], verbs: ['get', 'list', 'watch'] },
    { apiGroups: [''], resources: ['secrets'], verbs: ['create', 'delete', 'get', 'list', 'patch', 'update', 'watch'] },
    { apiGroups: ['addons.cluster.x-k8s.io'], resources: ['clusterresourcesets/finalizers', 'clusterresourcesets/status'], verbs: ['get', 'patch', 'update'] },
    { apiGroups: ['addons.cluster.x-k8s.io', 'bootstrap.cluster.x-k8s.io', 'controlplane.cluster.x-k8s.io', 'infrastructure.cluster.x-k8s.io'], resources: ['*'], verbs: ['create', 'delete', 'get', 'list', 'patch', 'update', 'watch'] },
    { apiGroups: ['apiextensions.k8s.io'], resources: ['customresourcedefinitions'], verbs: ['get', 'list', 'watch'] },
    { apiGroups: ['apiextensions.k8s.io'], resourceNames: ['clusterclasses.cluster.x-k8s.io', 'clusterresourcesetbindings.addons.cluster.x-k8s.io', 'clusterresourcesets.addons.cluster.x-k8s.io', 'clusters.cluster.x-k8s.io', 'extensionconfigs.runtime.cluster.x-k8s.io', 'ipaddressclaims.ipam.cluster.x-k8s.io', 'ipaddresses.ipam.cluster.x-k8s.io', 'machinedeployments.cluster.x-k8s.io', 'machinedrainrules.cluster.x-k8s.io', 'machinehealthchecks.cluster.x-k8s.io', 'machinepools.cluster.x-k8s.io', 'machines.cluster.x-k8s.io', 'machinesets.cluster.x-k8s.io'], resources: ['customresourcedefinitions', 'customresourcedefinitions/status'], verbs: ['patch', 'update'] },
    { apiGroups: ['authentication.k8s.io'], resources: ['tokenreviews'], verbs: ['create'] },
    { apiGroups: ['authorization.k8s.io'], resources: ['subjectaccessreviews'], verbs: ['create'] },
    { apiGroups: ['cluster.x-k8s.io'], resources: ['clusterclasses', 'clusterclasses/status', 'clusters', 'clusters/finalizers', 'clusters/status', 'machinedrainrules', 'machinehealthchecks/finalizers', 'machinehealthchecks/status'], verbs: ['get', 'list', 'patch', 'update', 'watch'] },
    { apiGroups: ['cluster.x-k8s.io'], resources: ['machinedeployments', 'machinedeployments/finalizers', 'machinedeployments/status', 'machinehealthchecks', 'machinepools', 'machinepools/finalizers', 'machinepools/status', 'machines', 'machines/finalizers', 'machines/status', 'machinesets', 'machinesets/finalizers', 'machinesets/status'], verbs: ['create', 'delete', 'get', 'list', 'patch', 'update', 'watch'] },
    { apiGroups: ['ipam.cluster.x-k8s.io'], resources: ['ipaddressclaims', 'ipaddresses'], verbs: ['get', 'list', 'patch', 'update', 'watch'] },
    { apiGroups: ['ipam.cluster.x-k8s.io'], resources: ['ipaddressclaims/status'], verbs: ['patch', 'update'] },
    { apiGroups: ['runtime.cluster.x-k8s.io'], resources: ['extensionconfigs', 'extensionconfigs/status'], verbs: ['get', 'list', 'patch', 'update', 'watch'] },
  ],
  'bootstrap-kubeadm': [
    { apiGroups: [''], resources: ['configmaps', 'secrets'], verbs: ['create', 'delete', 'get', 'list', 'patch', 'update', 'watch'] },
    { apiGroups: [''], resources: ['events'], verbs: ['create', 'patch'] },
    { apiGroups: ['apiextensions.k8s.io'], resources: ['customresourcedefinitions'], verbs: ['get', 'list', 'watch'] },
    { apiGroups: ['apiextensions.k8s.io'], resourceNames: ['kubeadmconfigs.bootstrap.cluster.x-k8s.io', 'kubeadmconfigtemplates.bootstrap.cluster.x-k8s.io'], resources: ['customresourcedefinitions', 'customresourcedefinitions/status'], verbs: ['patch', 'update'] },
    { apiGroups: ['authentication.k8s.io'], resources: ['tokenreviews'], verbs: ['create'] },
    { apiGroups: ['authorization.k8s.io'], resources: ['subjectaccessreviews'], verbs: ['create'] },
    { apiGroups: ['bootstrap.cluster.x-k8s.io'], resources: ['kubeadmconfigs', 'kubeadmconfigs/finalizers', 'kubeadmconfigs/status'], verbs: ['create', 'delete', 'get', 'list', 'patch', 'update', 'watch'] },
    { apiGroups: ['bootstrap.cluster.x-k8s.io'], resources: ['kubeadmconfigtemplates'], verbs: ['get', 'list', 'patch', 'update', 'watch'] },
    { apiGroups: ['cluster.x-k8s.io'], resources: ['clusters', 'clusters/status', 'machinepools', 'machinepools/status', 'machines', 'machines/status', 'machinesets'], verbs: ['get', 'list', 'watch'] },
    { apiGroups: ['controlplane.cluster.x-k8s.io'], resources: ['kubeadmcontrolplanes'], verbs: ['get', 'list', 'watch'] },
  ],
  'control-plane-kubeadm': [
    { apiGroups: [''], resources: ['events'], verbs: ['create', 'patch'] },
    { apiGroups: [''], resources: ['namespaces'], verbs: ['get', 'list', 'watch'] },
    { apiGroups: [''], resources: ['secrets'], verbs: ['create', 'delete', 'get', 'list', 'patch', 'update', 'watch'] },
    { apiGroups: ['apiextensions.k8s.io'], resources: ['customresourcedefinitions'], verbs: ['get', 'list', 'watch'] },
    { apiGroups: ['apiextensions.k8s.io'], resourceNames: ['kubeadmcontrolplanes.controlplane.cluster.x-k8s.io', 'kubeadmcontrolplanetemplates.controlplane.cluster.x-k8s.io'], resources: ['customresourcedefinitions', 'customresourcedefinitions/status'], verbs: ['patch', 'update'] },
    { apiGroups: ['authentication.k8s.io'], resources: ['tokenreviews'], verbs: ['create'] },
    { apiGroups: ['authorization.k8s.io'], resources: ['subjectaccessreviews'], verbs: ['create'] },
    { apiGroups: ['bootstrap.cluster.x-k8s.io', 'controlplane.cluster.x-k8s.io', 'infrastructure.cluster.x-k8s.io'], resources: ['*'], verbs: ['create', 'delete', 'get', 'list', 'patch', 'update', 'watch'] },
    { apiGroups: ['cluster.x-k8s.io'], resources: ['clusters', 'clusters/status', 'machinepools'], verbs: ['get', 'list', 'watch'] },
    { apiGroups: ['cluster.x-k8s.io'], resources: ['machines', 'machines/status'], verbs: ['create', 'delete', 'get', 'list', 'patch', 'update', 'watch'] },
    { apiGroups: ['runtime.cluster.x-k8s.io'], resources: ['extensionconfigs'], verbs: ['get', 'list', 'watch'] },
  ],
  'agent-provisioner': [
    { apiGroups: [''], resources: ['configmaps', 'secrets', 'serviceaccounts'], verbs: ['create', 'delete', 'get', 'patch', 'update'] },
    { apiGroups: [''], resources: ['namespaces'], verbs: ['create', 'get'] },
    { apiGroups: [''], resources: ['serviceaccounts/token'], verbs: ['create'] },
    { apiGroups: ['agent.provisioner.dev'], resources: ['hostregistrations', 'hosts', 'nodeplans', 'registrationtokens'], verbs: ['create', 'delete', 'get', 'list', 'patch', 'update', 'watch'] },
    { apiGroups: ['agent.provisioner.dev'], resources: ['hostregistrations/status', 'hosts/status', 'nodeplans/status', 'registrationtokens/status'], verbs: ['get', 'patch', 'update'] },
    { apiGroups: ['cluster.x-k8s.io'], resources: ['clusters', 'machines'], verbs: ['get', 'list', 'watch'] },
    { apiGroups: ['events.k8s.io'], resources: ['events'], verbs: ['create', 'patch'] },
    { apiGroups: ['infrastructure.cluster.x-k8s.io'], resources: ['*'], verbs: ['get'] },
    { apiGroups: ['infrastructure.provisioner.dev'], resources: ['hostclusters', 'hostmachines'], verbs: ['get', 'list', 'patch', 'update', 'watch'] },
    { apiGroups: ['infrastructure.provisioner.dev'], resources: ['hostclusters/finalizers', 'hostclusters/status', 'hostmachines/finalizers', 'hostmachines/status'], verbs: ['get', 'patch', 'update'] },
    { apiGroups: ['ipam.cluster.x-k8s.io'], resources: ['ipaddressclaims'], verbs: ['delete', 'get', 'list', 'patch', 'update', 'watch'] },
    { apiGroups: ['ipam.cluster.x-k8s.io'], resources: ['ipaddressclaims/status'], verbs: ['get', 'patch', 'update'] },
    { apiGroups: ['ipam.cluster.x-k8s.io'], resources: ['ipaddresses'], verbs: ['create', 'delete', 'get', 'list', 'watch'] },
    { apiGroups: ['ipam.provisioner.dev'], resources: ['addresspools'], verbs: ['get', 'list', 'watch'] },
    { apiGroups: ['ipam.provisioner.dev'], resources: ['addresspools/status'], verbs: ['get', 'patch', 'update'] },
    { apiGroups: ['rbac.authorization.k8s.io'], resources: ['clusterrolebindings', 'clusterroles', 'rolebindings', 'roles'], verbs: ['bind', 'create', 'delete', 'escalate', 'get', 'patch', 'update'] },
  ],
};

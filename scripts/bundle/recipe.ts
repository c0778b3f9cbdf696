/**
 * The build recipe of the bundle: which binaries and which provider components are
 * built from which wrapper module under embedded/modules. Versions are pinned in
 * exactly one place, each wrapper's go.mod; everything here reads them from there.
 */

import { platformOf, type Platform } from '../../src/embedded/manifest.js';

/** A Go build target. */
export interface Target {
  goos: 'linux' | 'darwin';
  goarch: 'amd64' | 'arm64';
}

/** Every target a release builds and packs (`npm run release:pack`); CI builds only the host's. */
export const releaseTargets: readonly Target[] = [
  { goos: 'linux', goarch: 'amd64' },
  { goos: 'linux', goarch: 'arm64' },
  { goos: 'darwin', goarch: 'amd64' },
  { goos: 'darwin', goarch: 'arm64' },
];

/** The target of this machine; throws on a platform no release is built for. */
export function hostTarget(): Target {
  const goarch = ({ x64: 'amd64', arm64: 'arm64' } as const)[process.arch as 'x64' | 'arm64'];
  const goos = process.platform;
  if ((goos !== 'linux' && goos !== 'darwin') || goarch === undefined) {
    throw new Error(`no build target for ${process.platform}/${process.arch}: provisioner builds for ${releaseTargets.map((t) => `${t.goos}/${t.goarch}`).join(', ')}`);
  }
  return { goos, goarch };
}

/** Parses `os/arch` in Go's names (e.g. `darwin/arm64`) into one of the release targets. */
export function parseTarget(text: string): Target {
  const found = releaseTargets.find((t) => `${t.goos}/${t.goarch}` === text.trim());
  if (!found) throw new Error(`unknown target ${JSON.stringify(text)}; known: ${releaseTargets.map((t) => `${t.goos}/${t.goarch}`).join(', ')}`);
  return found;
}

/** The target in Node's and npm's names (`process.platform`-`process.arch`, e.g. `darwin-arm64`). */
export function targetPlatform(target: Target): Platform {
  return platformOf(target.goos, target.goarch === 'amd64' ? 'x64' : 'arm64');
}

/** How a binary reports its version: which Go variables the linker stamps. */
export type VersionStamp = 'kubernetes' | 'cluster-api' | 'none';

export interface BinaryRecipe {
  /** Executable name in the bundle. */
  name: string;
  /** Wrapper module directory under embedded/modules. */
  wrapper: string;
  /** Go package to build (a `tool` of the wrapper's go.mod, or `.` for the wrapper's own main). */
  package: string;
  /** Module whose version the binary reports. */
  versionModule: string;
  stamp: VersionStamp;
  /** False for test and benchmark tools: built for development, never shipped in a release bundle. */
  shipped: boolean;
}

export const binaryRecipes: readonly BinaryRecipe[] = [
  { name: 'etcd', wrapper: 'etcd', package: '.', versionModule: 'go.etcd.io/etcd/server/v3', stamp: 'none', shipped: true },
  { name: 'kube-apiserver', wrapper: 'kubernetes', package: 'k8s.io/kubernetes/cmd/kube-apiserver', versionModule: 'k8s.io/kubernetes', stamp: 'kubernetes', shipped: true },
  { name: 'capi-manager', wrapper: 'capi', package: 'sigs.k8s.io/cluster-api/core', versionModule: 'sigs.k8s.io/cluster-api', stamp: 'cluster-api', shipped: true },
  { name: 'kubeadm-bootstrap-manager', wrapper: 'capi', package: 'sigs.k8s.io/cluster-api/bootstrap/kubeadm', versionModule: 'sigs.k8s.io/cluster-api', stamp: 'cluster-api', shipped: true },
  { name: 'kubeadm-control-plane-manager', wrapper: 'capi', package: 'sigs.k8s.io/cluster-api/controlplane/kubeadm', versionModule: 'sigs.k8s.io/cluster-api', stamp: 'cluster-api', shipped: true },
  { name: 'capd-manager', wrapper: 'capi', package: 'sigs.k8s.io/cluster-api/test/infrastructure/docker', versionModule: 'sigs.k8s.io/cluster-api/test', stamp: 'cluster-api', shipped: true },
  { name: 'clusterctl', wrapper: 'capi', package: 'sigs.k8s.io/cluster-api/cmd/clusterctl', versionModule: 'sigs.k8s.io/cluster-api', stamp: 'cluster-api', shipped: false },
  { name: 'kubectl', wrapper: 'kubernetes', package: 'k8s.io/kubernetes/cmd/kubectl', versionModule: 'k8s.io/kubernetes', stamp: 'kubernetes', shipped: false },
];

export type ProviderType = 'CoreProvider' | 'BootstrapProvider' | 'ControlPlaneProvider' | 'InfrastructureProvider';

export interface ComponentsRecipe {
  /** Provider name as clusterctl knows it. */
  provider: string;
  type: ProviderType;
  /** Namespace of the provider's inventory entry (clusterctl's default for it). */
  namespace: string;
  wrapper: string;
  /** Module holding the provider's config/ directory. */
  module: string;
  /** Kustomization directories inside the module whose CRDs (with labels and conversion patches) are included. */
  crdKustomizations: readonly string[];
  /** Webhook configuration manifests inside the module (controller-gen output). */
  webhookManifests: readonly string[];
  /** Binary serving this provider's controllers and webhooks; absent for CRD-only components. */
  binary?: string;
}

export const componentRecipes: readonly ComponentsRecipe[] = [
  {
    provider: 'cluster-api', type: 'CoreProvider', namespace: 'capi-system', wrapper: 'capi', module: 'sigs.k8s.io/cluster-api',
    // clusterctl's own inventory CRD travels with the core provider, as `clusterctl init` installs it.
    crdKustomizations: ['core/config/crd', 'cmd/clusterctl/config/crd'],
    webhookManifests: ['core/config/webhook/manifests.yaml'],
    binary: 'capi-manager',
  },
  {
    provider: 'bootstrap-kubeadm', type: 'BootstrapProvider', namespace: 'capi-kubeadm-bootstrap-system', wrapper: 'capi', module: 'sigs.k8s.io/cluster-api',
    crdKustomizations: ['bootstrap/kubeadm/config/crd'],
    webhookManifests: ['bootstrap/kubeadm/config/webhook/manifests.yaml'],
    binary: 'kubeadm-bootstrap-manager',
  },
  {
    provider: 'control-plane-kubeadm', type: 'ControlPlaneProvider', namespace: 'capi-kubeadm-control-plane-system', wrapper: 'capi', module: 'sigs.k8s.io/cluster-api',
    crdKustomizations: ['controlplane/kubeadm/config/crd'],
    webhookManifests: ['controlplane/kubeadm/config/webhook/manifests.yaml'],
    binary: 'kubeadm-control-plane-manager',
  },
  {
    provider: 'infrastructure-docker', type: 'InfrastructureProvider', namespace: 'capd-system', wrapper: 'capi', module: 'sigs.k8s.io/cluster-api/test',
    crdKustomizations: ['infrastructure/docker/config/crd'],
    webhookManifests: ['infrastructure/docker/config/webhook/manifests.yaml'],
    binary: 'capd-manager',
  },
  {
    // CRDs only: lets the local control plane validate AWS manifests with a server-side dry-run.
    provider: 'infrastructure-aws', type: 'InfrastructureProvider', namespace: 'capa-system', wrapper: 'crds-aws', module: 'sigs.k8s.io/cluster-api-provider-aws/v2',
    crdKustomizations: ['config/crd'],
    webhookManifests: [],
  },
];

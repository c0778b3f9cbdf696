/**
 * The build recipe of the bundle: which binaries and which provider components are
 * built from which wrapper module under embedded/modules, or from a Go module of our
 * own in this repository (provider/). Third-party versions are pinned in exactly one
 * place, each wrapper's go.mod; everything here reads them from there. Our own
 * binaries and components carry package.json's version (see ownVersion in build.ts).
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

/**
 * How a binary reports its version: the Go packages whose `gitVersion`, `gitMajor`,
 * `gitCommit`, ... variables the linker stamps (Kubernetes' and Cluster API's
 * convention, which the providers copy). Empty: the binary reports its own.
 */
const stamps = {
  kubernetes: ['k8s.io/component-base/version', 'k8s.io/client-go/pkg/version'],
  clusterApi: ['sigs.k8s.io/cluster-api/version'],
  aws: ['sigs.k8s.io/cluster-api-provider-aws/v2/version'],
  vsphere: ['sigs.k8s.io/cluster-api-provider-vsphere/pkg/version'],
  none: [],
} as const satisfies Record<string, readonly string[]>;

interface BinaryRecipeCommon {
  /** Executable name in the bundle. */
  name: string;
  /** Go package to build (a `tool` of the wrapper's go.mod, `.` for the wrapper's own main, or `./cmd/x` in our own module). */
  package: string;
  /** Module whose version the binary reports. */
  versionModule: string;
  /** Go packages whose version variables the linker sets (see `stamps`). */
  versionPackages: readonly string[];
  /**
   * Other string variables (`<package path>.<Name>`) the linker sets to the version, for
   * binaries that keep it in one variable of their own (flannel's `version.Version`).
   * Default: none.
   */
  versionVariables?: readonly string[];
  /** False for test and benchmark tools: built for development, never shipped in a release bundle. */
  shipped: boolean;
  /** The operating systems it is built for (node-only binaries that do not compile elsewhere). Default: every release target's. */
  oses?: readonly Target['goos'][];
  /**
   * The names a multi-call executable runs as (it dispatches on argv[0]'s base name): each
   * is looked up like a binary of its own and becomes a link to this one. Default: none.
   */
  links?: readonly string[];
  /**
   * True: the package's test binary (`go test -c`, with the same flags and stamps) instead of
   * `go build`'s command, for suites that exist only as tests (Kubernetes' e2e.test). Default: false.
   */
  testBinary?: boolean;
}

/** Whether a recipe is built for `target` (see `oses`). */
export function builtFor(recipe: BinaryRecipe, target: Target): boolean {
  return recipe.oses?.includes(target.goos) ?? true;
}

/** A third-party binary, built through a wrapper module that pins its version. */
export interface WrappedBinaryRecipe extends BinaryRecipeCommon {
  /** Wrapper module directory under embedded/modules. */
  wrapper: string;
}

/** A binary of a Go module of ours, built from its sources in this repository. */
export interface OwnBinaryRecipe extends BinaryRecipeCommon {
  /** Module directory relative to the repository root (e.g. `provider`). */
  ownModule: string;
}

export type BinaryRecipe = WrappedBinaryRecipe | OwnBinaryRecipe;

/** The Kubernetes components the multi-call `kube` executable runs, by the names they are called by. */
export const kubeComponents = ['kube-apiserver', 'kubelet', 'kubeadm', 'kube-controller-manager', 'kube-scheduler', 'kube-proxy'] as const;

/** The agent provider's module (provider/): its version variable is `Version`, set to package.json's version. */
const agentProvider = { ownModule: 'provider', versionModule: 'provisioner.dev/provider', versionPackages: ['provisioner.dev/provider/internal/version'] } as const;

export const binaryRecipes: readonly BinaryRecipe[] = [
  { name: 'etcd', wrapper: 'etcd', package: '.', versionModule: 'go.etcd.io/etcd/server/v3', versionPackages: stamps.none, shipped: true },
  // The Kubernetes components in one multi-call executable (embedded/modules/kubernetes/cmd/kube, as hyperkube and k3s):
  // it runs the component it is called by (argv[0]'s base name, so a link named kubelet) or its first argument names.
  // kube-apiserver runs the local control plane; kubelet and kubeadm run on hosts; kube-controller-manager,
  // kube-scheduler and kube-proxy run there as static pods and a DaemonSet from images built from it (src/nodeartifacts).
  // Static (goEnv sets CGO_ENABLED=0), so it runs in images with nothing else in them.
  { name: 'kube', wrapper: 'kubernetes', package: './cmd/kube', versionModule: 'k8s.io/kubernetes', versionPackages: stamps.kubernetes, shipped: true, links: kubeComponents },
  // Cluster API's core, kubeadm bootstrap, kubeadm control-plane and development (in-memory) providers and our agent
  // provider (provider/setup, through the wrapper's replace of provisioner.dev/provider) in one process: the wrapper's
  // own main (embedded/modules/capi/main.go), run with --providers naming those installed. Built before the add-ons: CoreDNS
  // and flannel require every module they share with it at its version (scripts/bundle/wrapper-modules.test.ts), so
  // their Kubernetes, gRPC and golang.org/x packages come from Go's build cache instead of compiling again.
  { name: 'capi-manager', wrapper: 'capi', package: '.', versionModule: 'sigs.k8s.io/cluster-api', versionPackages: stamps.clusterApi, shipped: true },
  // The cluster add-ons of hosts-platform clusters, run there from images built from them (src/nodeartifacts):
  // CoreDNS with our plugin set (embedded/modules/coredns/main.go; `-version` prints its constant CoreVersion,
  // the commit is stamped), flanneld (flannel's main.go less the cgo udp and the tencentvpc backends) and the
  // flannel CNI plugin, which flannel's DaemonSet copies to each host's /opt/cni/bin. Both flannel binaries are Linux
  // only (the CNI plugin's add/del exist for Linux alone; flanneld is Linux and Windows upstream), so a darwin bundle
  // or release has neither; nodes are Linux.
  { name: 'coredns', wrapper: 'coredns', package: '.', versionModule: 'github.com/coredns/coredns', versionPackages: stamps.none, versionVariables: ['github.com/coredns/coredns/coremain.GitCommit'], shipped: true },
  { name: 'flanneld', wrapper: 'flannel', package: '.', versionModule: 'github.com/flannel-io/flannel', versionPackages: stamps.none, versionVariables: ['github.com/flannel-io/flannel/pkg/version.Version'], shipped: true, oses: ['linux'] },
  { name: 'flannel', wrapper: 'flannel-cni', package: 'github.com/containernetworking/plugins/plugins/meta/flannel', versionModule: 'github.com/containernetworking/plugins', versionPackages: stamps.none, versionVariables: ['github.com/containernetworking/plugins/pkg/utils/buildversion.BuildVersion'], shipped: true, oses: ['linux'] },
  { name: 'capa-manager', wrapper: 'capa', package: 'sigs.k8s.io/cluster-api-provider-aws/v2', versionModule: 'sigs.k8s.io/cluster-api-provider-aws/v2', versionPackages: stamps.aws, shipped: true },
  { name: 'capv-manager', wrapper: 'capv', package: 'sigs.k8s.io/cluster-api-provider-vsphere', versionModule: 'sigs.k8s.io/cluster-api-provider-vsphere', versionPackages: stamps.vsphere, shipped: true },
  // Ours: the agent users copy to their hosts. Its manager's provider runs in capi-manager (above); provider/cmd/manager,
  // the same provider alone, is built by provider's own tests, not bundled.
  { name: 'provisioner-agent', package: './cmd/agent', ...agentProvider, shipped: true },
  // Ours: the local control plane's second listener, on the one address a user names for hosts (kube-apiserver binds one).
  { name: 'provisioner-forwarder', package: './cmd/forwarder', ...agentProvider, shipped: true },
  // Ours: the pod sandbox (infra container) of hosts-platform nodes, shipped as image provisioner.local/pause.
  { name: 'pause', package: './cmd/pause', ...agentProvider, shipped: true },
  // The vCenter simulator for the vsphere platform's tests; main.version is its own variable.
  { name: 'vcsim', wrapper: 'vcsim', package: '.', versionModule: 'github.com/vmware/govmomi', versionPackages: ['main'], shipped: false },
  // govmomi's vSphere CLI from the same govmomi as vcsim, for the vsphere tests' listing of what the simulator holds; its version lives in cli/flags.
  { name: 'govc', wrapper: 'govc', package: '.', versionModule: 'github.com/vmware/govmomi', versionPackages: stamps.none, versionVariables: ['github.com/vmware/govmomi/cli/flags.BuildVersion'], shipped: false },
  // The CNCF distribution registry (an OCI distribution API server) for the tests of `management install --image-registry`:
  // embedded/modules/distribution/main.go links only its filesystem and inmemory storage and htpasswd auth.
  { name: 'registry', wrapper: 'distribution', package: '.', versionModule: 'github.com/distribution/distribution/v3', versionPackages: stamps.none, versionVariables: ['github.com/distribution/distribution/v3/version.version'], shipped: false },
  { name: 'clusterctl', wrapper: 'capi', package: 'sigs.k8s.io/cluster-api/cmd/clusterctl', versionModule: 'sigs.k8s.io/cluster-api', versionPackages: stamps.clusterApi, shipped: false },
  { name: 'kubectl', wrapper: 'kubernetes', package: 'k8s.io/kubernetes/cmd/kubectl', versionModule: 'k8s.io/kubernetes', versionPackages: stamps.kubernetes, shipped: false },
  // Kubernetes' e2e test server (DNS, HTTP, netexec...), for tests of Services and DNS on hosts-platform clusters.
  { name: 'agnhost', wrapper: 'kubernetes', package: 'k8s.io/kubernetes/test/images/agnhost', versionModule: 'k8s.io/kubernetes', versionPackages: stamps.kubernetes, shipped: false },
  // Kubernetes' end-to-end suite (the [Conformance] tests among it), run against hosts-platform clusters by the
  // conformance tier and `npm run conformance` (scripts/conformance). Linux only: the clusters it tests are.
  { name: 'e2e.test', wrapper: 'kubernetes', package: 'k8s.io/kubernetes/test/e2e', versionModule: 'k8s.io/kubernetes', versionPackages: stamps.kubernetes, shipped: false, oses: ['linux'], testBinary: true },
];

export type ProviderType = 'CoreProvider' | 'BootstrapProvider' | 'ControlPlaneProvider' | 'InfrastructureProvider';

interface ComponentsRecipeCommon {
  /** Provider name as clusterctl knows it. */
  provider: string;
  type: ProviderType;
  /** Namespace of the provider's inventory entry (clusterctl's default for it). */
  namespace: string;
  /**
   * Directories inside the module whose CRDs are included: a kustomization (with its
   * labels and conversion patches), or, without a kustomization.yaml, every YAML file in it.
   */
  crdKustomizations: readonly string[];
  /** Webhook configuration manifests inside the module (controller-gen output). */
  webhookManifests: readonly string[];
  /** Binary serving this provider's controllers and webhooks; absent for CRD-only components. */
  binary?: string;
  /**
   * The manager's ClusterRole inside the module (controller-gen output of its kubebuilder
   * markers), carried in the components for `management install`, which runs the provider as a
   * pod with exactly these rules. Only for the providers it runs as pods.
   */
  managerRole?: string;
}

/** A third-party provider's components, read from its module as a wrapper pins it. */
export interface WrappedComponentsRecipe extends ComponentsRecipeCommon {
  wrapper: string;
  /** Module holding the provider's config/ directory. */
  module: string;
}

/** Components of a Go module of ours, read from this repository. */
export interface OwnComponentsRecipe extends ComponentsRecipeCommon {
  /** Module directory relative to the repository root. */
  ownModule: string;
}

export type ComponentsRecipe = WrappedComponentsRecipe | OwnComponentsRecipe;

export const componentRecipes: readonly ComponentsRecipe[] = [
  {
    provider: 'cluster-api', type: 'CoreProvider', namespace: 'capi-system', wrapper: 'capi', module: 'sigs.k8s.io/cluster-api',
    // clusterctl's own inventory CRD travels with the core provider, as `clusterctl init` installs it.
    crdKustomizations: ['core/config/crd', 'cmd/clusterctl/config/crd'],
    webhookManifests: ['core/config/webhook/manifests.yaml'],
    binary: 'capi-manager',
    managerRole: 'core/config/rbac/role.yaml',
  },
  {
    provider: 'bootstrap-kubeadm', type: 'BootstrapProvider', namespace: 'capi-kubeadm-bootstrap-system', wrapper: 'capi', module: 'sigs.k8s.io/cluster-api',
    crdKustomizations: ['bootstrap/kubeadm/config/crd'],
    webhookManifests: ['bootstrap/kubeadm/config/webhook/manifests.yaml'],
    binary: 'capi-manager',
    managerRole: 'bootstrap/kubeadm/config/rbac/role.yaml',
  },
  {
    provider: 'control-plane-kubeadm', type: 'ControlPlaneProvider', namespace: 'capi-kubeadm-control-plane-system', wrapper: 'capi', module: 'sigs.k8s.io/cluster-api',
    crdKustomizations: ['controlplane/kubeadm/config/crd'],
    webhookManifests: ['controlplane/kubeadm/config/webhook/manifests.yaml'],
    binary: 'capi-manager',
    managerRole: 'controlplane/kubeadm/config/rbac/role.yaml',
  },
  {
    provider: 'infrastructure-docker', type: 'InfrastructureProvider', namespace: 'capd-system', wrapper: 'capi', module: 'sigs.k8s.io/cluster-api/test',
    crdKustomizations: ['infrastructure/docker/config/crd'],
    webhookManifests: ['infrastructure/docker/config/webhook/manifests.yaml'],
    binary: 'capi-manager',
  },
  {
    provider: 'infrastructure-aws', type: 'InfrastructureProvider', namespace: 'capa-system', wrapper: 'capa', module: 'sigs.k8s.io/cluster-api-provider-aws/v2',
    crdKustomizations: ['config/crd'],
    webhookManifests: ['config/webhook/manifests.yaml'],
    binary: 'capa-manager',
  },
  {
    provider: 'infrastructure-vsphere', type: 'InfrastructureProvider', namespace: 'capv-system', wrapper: 'capv', module: 'sigs.k8s.io/cluster-api-provider-vsphere',
    crdKustomizations: ['config/default/crd'],
    webhookManifests: ['config/govmomi/webhook/manifests.yaml'],
    binary: 'capv-manager',
  },
  {
    // Ours. clusterctl knows no "agent" provider type; InfrastructureProvider is the one that
    // fits: this provider is how the product reaches machines (hosts) it did not create, and
    // the coming hosts platform builds its machines on it. CoreProvider would clash with
    // cluster-api, and Bootstrap/ControlPlane/IPAM/Addon types promise contracts it has not.
    provider: 'agent-provisioner', type: 'InfrastructureProvider', namespace: 'provisioner-agent-system', ownModule: 'provider',
    crdKustomizations: ['config/crd'],
    webhookManifests: ['config/webhook/manifests.yaml'],
    binary: 'capi-manager',
    managerRole: 'config/rbac/role.yaml',
  },
];

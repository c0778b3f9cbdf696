/**
 * The two manifests the CLI reads its binaries from, shared by the scripts that write
 * them (scripts/bundle, scripts/release) and the runtime (src/embedded), so they cannot drift:
 *
 *  - the bundle manifest, `bundle/manifest.json`, written by `npm run bundle` in a
 *    development checkout: one platform, every binary as a gzip archive beside it;
 *  - the release manifest, `release/manifest.json` in the published `provisioner`
 *    package, written by `npm run release:pack`: every platform, each binary in its own
 *    npm package (`@provisioner/<binary>-<os>-<cpu>`), with the sha256 the CLI checks
 *    the installed binary against before first use.
 */

export const bundleSchemaVersion = 1;

/** One bundled executable, stored as a gzip stream of the binary. */
export interface BundledBinary {
  /** Executable name, e.g. `kube-apiserver`. */
  name: string;
  /** Version the binary reports, e.g. `v1.36.3`. */
  version: string;
  /** Go module the binary was built from, e.g. `k8s.io/kubernetes`. */
  module: string;
  /** Version of that module, as pinned in the wrapper's go.mod. */
  moduleVersion: string;
  /** Go package path of the main package. */
  package: string;
  /** Archive file, relative to the bundle directory, e.g. `bin/kube-apiserver.gz`. */
  archive: string;
  /** sha256 (hex) of the uncompressed binary: the cache key and the integrity check. */
  sha256: string;
  /** sha256 (hex) of the archive file as shipped. */
  archiveSha256: string;
  /** Uncompressed size in bytes. */
  size: number;
  /** Archive size in bytes. */
  compressedSize: number;
  /**
   * False for tools built only for tests and benchmarks (clusterctl, kubectl):
   * present in a development bundle, never in a release.
   */
  shipped: boolean;
  /**
   * The names a multi-call executable runs as (it dispatches on the base name it is called
   * by): `kube` runs kube-apiserver, kubelet, kubeadm, ... Each is found like a binary of its
   * own and made a link to this one (embedded/cache.ts). Absent: none.
   */
  links?: string[];
}

/**
 * Every name a binary is found by: its own and each of its links (`kube-apiserver` →
 * the `kube` entry). The one index both catalogs look binaries up in.
 */
export function binariesByName<B extends { name: string; links?: string[] }>(binaries: readonly B[]): Map<string, B> {
  const index = new Map<string, B>();
  for (const b of binaries) for (const name of [b.name, ...(b.links ?? [])]) index.set(name, b);
  return index;
}

/** The CRDs and webhook configurations of one provider, ready to rewrite to loopback. */
export interface BundledComponents {
  /** Provider name as clusterctl knows it, e.g. `cluster-api`, `bootstrap-kubeadm`. */
  provider: string;
  /** clusterctl provider type: CoreProvider, BootstrapProvider, ControlPlaneProvider, InfrastructureProvider. */
  type: 'CoreProvider' | 'BootstrapProvider' | 'ControlPlaneProvider' | 'InfrastructureProvider';
  /** Namespace the provider's inventory entry lives in, e.g. `capi-system`. */
  namespace: string;
  version: string;
  /** Binary that serves this provider's controllers and webhooks; absent for CRD-only entries (a provider bundled for validation only). */
  binary?: string;
  /** Multi-document YAML file relative to the bundle directory. */
  file: string;
  sha256: string;
}

/** A Debian package a layer was built from. */
export interface BundledLayerPackage {
  name: string;
  /** Debian version, e.g. `1.8.9-2`. */
  version: string;
}

/**
 * A file-system layer of node images, stored as a gzip stream of an uncompressed tar:
 * `userland`, Debian's nft iptables and busybox for the kube-proxy and flannel images
 * (scripts/bundle/userland.ts).
 */
export interface BundledLayer {
  /** Layer name, e.g. `userland`. */
  name: string;
  /** Archive file, relative to the bundle directory, e.g. `layers/userland.tar.gz`. */
  archive: string;
  /** sha256 (hex) of the uncompressed tar: the cache key, the integrity check and the image's diff_id. */
  sha256: string;
  /** sha256 (hex) of the archive file as shipped. */
  archiveSha256: string;
  /** Uncompressed size in bytes. */
  size: number;
  /** Archive size in bytes. */
  compressedSize: number;
  /** Debian architecture of its executables, e.g. `amd64`. */
  architecture: string;
  /** The packages and versions its files come from. */
  packages: BundledLayerPackage[];
}

export interface BundleManifest {
  schemaVersion: typeof bundleSchemaVersion;
  /** Hash of the build recipe (embedded/ inputs, Go version, flags) this bundle was built from. */
  recipeHash: string;
  /** `go version` output of the toolchain that built it. */
  goVersion: string;
  /** Platform the binaries run on. Absent in bundles built before cross-builds: the machine's own. */
  platform?: Platform;
  createdAt: string;
  binaries: BundledBinary[];
  components: BundledComponents[];
  /** Layers of node images; absent in bundles built before them or on a machine without Debian's apt. */
  layers?: BundledLayer[];
}

/** An OS and CPU in Node's names (`process.platform`-`process.arch`), e.g. `linux-x64`. */
export type Platform = `${'linux' | 'darwin'}-${'x64' | 'arm64'}`;

/** The platform of `os` and `cpu` in Node's names. */
export function platformOf(os: 'linux' | 'darwin', cpu: 'x64' | 'arm64'): Platform {
  return `${os}-${cpu}`;
}

/** npm scope of the per-platform binary packages. */
const platformPackageScope = '@provisioner';

/** The npm package holding one binary for one platform, e.g. `@provisioner/kube-apiserver-linux-x64`. */
export function platformPackageName(binary: string, platform: Platform): string {
  return `${platformPackageScope}/${binary}-${platform}`;
}

export const releaseSchemaVersion = 1;

/** Directory of the release manifest and the component YAMLs inside the published `provisioner` package. */
export const releaseDirName = 'release';

/** How a platform package's file holds its binary: a compressed stream, extracted into the cache on first use. */
export const binaryFormats = ['brotli', 'gzip'] as const;
export type BinaryFormat = (typeof binaryFormats)[number];

/** One binary built for one platform, as its platform package holds it. */
export interface PlatformBinary {
  /** npm package name, e.g. `@provisioner/etcd-linux-x64`; its version is the release's. */
  package: string;
  /** File inside the package, relative to its root: `bin/<name>.br` (what `release:pack` ships) or `bin/<name>.gz`. */
  file: string;
  format: BinaryFormat;
  /** sha256 (hex) of the binary itself: checked before first use. */
  sha256: string;
  /** Size of the binary in bytes. */
  size: number;
  /** Size of `file` in bytes. */
  fileSize: number;
}

/** One binary of a release, with its build for every platform. */
export interface ReleasedBinary {
  name: string;
  version: string;
  module: string;
  moduleVersion: string;
  /** Go package path of the main package. */
  package: string;
  /** The names it runs as, each a link to it (see BundledBinary.links). Absent: none. */
  links?: string[];
  platforms: Partial<Record<Platform, PlatformBinary>>;
}

export interface ReleaseManifest {
  schemaVersion: typeof releaseSchemaVersion;
  /** Version of `provisioner`, and exactly that of every platform package it depends on. */
  version: string;
  goVersion: string;
  createdAt: string;
  binaries: ReleasedBinary[];
  /** Component YAMLs; `file` is relative to the release directory. */
  components: BundledComponents[];
}

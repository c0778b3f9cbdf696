/**
 * The bundle manifest: what `npm run bundle` writes to `bundle/manifest.json` and
 * what the CLI reads at run time. Shared by the build script (scripts/bundle) and the
 * extraction cache (src/embedded), so the two cannot drift.
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
  /** Binary that serves this provider's controllers and webhooks; absent for CRD-only entries (e.g. AWS for validation). */
  binary?: string;
  /** Multi-document YAML file relative to the bundle directory. */
  file: string;
  sha256: string;
}

export interface BundleManifest {
  schemaVersion: typeof bundleSchemaVersion;
  /** Hash of the build recipe (embedded/ inputs, Go version, flags) this bundle was built from. */
  recipeHash: string;
  /** `go version` output of the toolchain that built it. */
  goVersion: string;
  createdAt: string;
  binaries: BundledBinary[];
  components: BundledComponents[];
}

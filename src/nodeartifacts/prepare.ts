/**
 * Prepares what machines download to become nodes: kubelet and kubeadm, and the image
 * archives of the control-plane images, pause, CoreDNS and flannel, built from the bundled binaries (and the userland layer) at
 * `create cluster` time (the npm package carries each binary once). They land in the
 * control plane's artifacts directory, which its forwarder serves read-only on the
 * listen address; each comes back with the URL and sha256 a NodePlan contentRef names.
 */
import { binaryDigests, resolveCacheDir, ensureBinaries, ensureLayer, type CacheOptions } from '../embedded/cache.js';
import { loadBinaryCatalog } from '../embedded/catalog.js';
import { EnvironmentError } from '../errors.js';
import { controlPlaneLayout } from '../controlplane/layout.js';
import { readListenRecord } from '../controlplane/local-controlplane.js';
import { loadedImages } from './loaded-images.js';
import {
  ensureNodeImages,
  nodeBinaryNames,
  nodeImageBinaries,
  nodeImageNames,
  prepareNodeArtifacts,
  userlandLayerName,
  type NodeArtifact,
  type NodeBinary,
} from './node-images.js';

export interface NodeArtifactsRequest extends Pick<CacheOptions, 'sink' | 'signal' | 'cacheDir' | 'env'> {
  /** Install directory whose control plane serves the artifacts. */
  dir: string;
}

export interface ServedNodeArtifact extends NodeArtifact {
  /** `<artifactsUrl>/<path>`; undefined when the control plane serves no listen address. */
  url: string | undefined;
}

/**
 * Fills the artifacts directory of `dir`'s control plane (see ControlPlaneLayout.artifactsDir).
 * Image archives are cached by their binary's digest, so only a new bundle rebuilds them.
 */
export async function prepareNodeArtifactsFor(request: NodeArtifactsRequest): Promise<ServedNodeArtifact[]> {
  const arch = ({ x64: 'amd64', arm64: 'arm64' } as const)[process.arch as 'x64' | 'arm64'];
  if (process.platform !== 'linux' || arch === undefined) {
    // The bundle holds binaries for the CLI's own platform; nodes need Linux ones.
    throw new EnvironmentError(`Node images need Linux binaries; this CLI runs on ${process.platform}/${process.arch} and bundles its own platform's`, {
      hint: 'Run provisioner on a Linux machine (amd64 or arm64) to prepare node artifacts.',
    });
  }
  const catalog = await loadBinaryCatalog(request);
  const imageBinaries = [...new Set(nodeImageNames.flatMap((n) => nodeImageBinaries(n)))];
  const paths = await ensureBinaries([...nodeBinaryNames, ...imageBinaries], { ...request, catalog });
  // The catalog's sha256 is the extracted file's (the cache checked it at extraction and keys the file by it): hashing
  // the binaries again here cost about 2 s of CPU at every create (the 149 MB multi-call kube six times, 0.3 s each).
  const digests = await binaryDigests(catalog, [...nodeBinaryNames, ...imageBinaries]);
  const binary = (name: string): NodeBinary => ({ path: paths[name]!, version: catalog.binary(name).version, sha256: digests[name]! });
  // MissingLayerError (exit as an EnvironmentError) for a bundle or release without it: kube-proxy needs iptables.
  const userland = await ensureLayer(catalog, userlandLayerName, { ...request, catalog });
  const images = await ensureNodeImages(Object.fromEntries(imageBinaries.map((n) => [n, binary(n)])), {
    cacheDir: resolveCacheDir(request),
    architecture: arch,
    userland: { path: userland.path, sha256: userland.layer.sha256, description: `${userlandLayerName}: ${userland.layer.packages.map((p) => `${p.name} ${p.version}`).join(', ')}` },
  });
  const layout = controlPlaneLayout(request.dir);
  // The images users loaded (`images load`) stay part of what every node gets.
  const artifacts = [...(await prepareNodeArtifacts(layout.artifactsDir, Object.fromEntries(nodeBinaryNames.map((n) => [n, binary(n)])), images)), ...(await loadedImages(layout.artifactsDir))];
  const base = (await readListenRecord(request.dir))?.artifactsUrl;
  return artifacts.map((a) => ({ ...a, url: base === undefined ? undefined : `${base}/${a.path}` }));
}

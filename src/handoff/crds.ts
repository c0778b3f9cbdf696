/**
 * CustomResourceDefinitions of the products a cluster is handed to (Rancher, Fleet), kept as
 * files of our own under `manifests/crds/` (see the header of each file for where its shape
 * comes from). The product never installs them into a real Rancher or Fleet: tests install
 * them into a plain control plane that stands in for the product's cluster, and the
 * `register`/`import` preflights name them when a cluster lacks one.
 */
import path from 'node:path';
import { EnvironmentError } from '../errors.js';
import { packageRoot } from '../embedded/catalog.js';
import { invalidInput, parseYamlStream, readInputText, type FileKind } from '../input-files.js';
import type { KubeClient, KubeObject } from '../kube/client.js';
import { applyAll, waitForEstablished, crdNoProgressTimeoutMs } from '../controlplane/install.js';

/** Where the hand-off CRD files live: `<package>/manifests/crds`. */
const handoffCrdsDir = path.join(packageRoot, 'manifests', 'crds');

/** A CRD file of ours: a few KiB of YAML, at most 1 MiB. */
const crdFile: FileKind = {
  name: 'CRD manifest',
  maxBytes: 1024 * 1024,
  writer: 'provisioner',
  hint: () => 'it ships with provisioner under manifests/crds/: reinstall the package, or restore the file from the repository',
};

/** The CRDs of `file` (a name under `manifests/crds/`, e.g. `rancher.yaml`, or a path): every document must be a CustomResourceDefinition. */
export async function loadCrds(file: string): Promise<KubeObject[]> {
  const resolved = path.isAbsolute(file) ? file : path.join(handoffCrdsDir, file);
  const text = await readInputText(resolved, crdFile);
  if (text === undefined) throw new EnvironmentError(`${resolved} does not exist`, { hint: crdFile.hint(resolved) });
  const documents = parseYamlStream(text, resolved, crdFile).filter((d) => d !== null && d !== undefined);
  const problems = documents.flatMap((d, i) =>
    typeof d === 'object' && (d as KubeObject).kind === 'CustomResourceDefinition' && typeof (d as KubeObject).metadata?.name === 'string'
      ? []
      : [{ path: `document ${i + 1}`, message: 'not a CustomResourceDefinition with a metadata.name' }],
  );
  if (problems.length > 0) throw invalidInput(resolved, crdFile, problems);
  return documents as KubeObject[];
}

/** Installs `crds` into the cluster of `client` (server-side apply, idempotent) and waits until each is Established. */
export async function installCrds(client: KubeClient, crds: readonly KubeObject[], options: { signal?: AbortSignal } = {}): Promise<void> {
  await applyAll(client, crds, options.signal);
  await waitForEstablished(client, crds.map((c) => c.metadata.name), crdNoProgressTimeoutMs, options.signal);
  client.resetDiscovery();
}

/**
 * Loading images (`images load`, and `management install` for the providers' images): image archives onto every node of an install's cluster and onto nodes that
 * join it later, without a registry (what `kind load image-archive` is for kind). The local
 * control plane keeps each archive by digest among the node artifacts its forwarder serves;
 * the platform puts them on its nodes (on hosts: a NodePlan per host that downloads them by
 * digest and imports them). Running it again with the same archives runs nothing twice.
 */
import { access } from 'node:fs/promises';
import { readInstallConfig } from '../assets/index.js';
import type { InstallConfig } from '../config/index.js';
import { controlPlaneLayout } from '../controlplane/layout.js';
import { EnvironmentError, UsageError } from '../errors.js';
import { log, type EventSink } from '../events.js';
import { keepLoadedImage } from './loaded-images.js';
import { platformFor } from '../platforms/index.js';
import { attachManagement } from '../management/attach.js';
import { recordedExternalManagement } from '../installdir/management.js';
import { isSelfManaged } from '../pivot/target.js';
import { prepareNodeArtifactsFor } from './prepare.js';

export interface LoadImagesRequest {
  dir: string;
  /** Image archives (OCI layout or `docker save` tars), as the user named them. */
  archives: readonly string[];
  sink: EventSink;
  signal: AbortSignal;
  /** Time without any host making progress before the command fails, in ms. Default 10 min. */
  noProgressTimeoutMs?: number;
  /** The install config of `dir` as the caller read it. Default: read here. */
  config?: InstallConfig;
}

export interface LoadedImage {
  file: string;
  sha256: string;
  refs: readonly string[];
}

/** Refuses an archive that cannot be read, naming it, before anything is locked or started. */
export async function checkImageArchives(archives: readonly string[]): Promise<void> {
  for (const archive of archives) {
    await access(archive).catch((cause: unknown) => {
      throw new UsageError(`Cannot read image archive ${archive}`, { cause, hint: 'Name image archives (tar files) that exist, e.g. one written by `docker save -o app.tar app:v1`.' });
    });
  }
}

/**
 * Keeps the archives among the node artifacts of the install's local control plane and has
 * the platform put them on its nodes. The caller holds the directory lock; `dir` is absolute.
 */
export async function loadImagesLocked(request: LoadImagesRequest): Promise<LoadedImage[]> {
  const { dir, sink, signal } = request;
  const config = request.config ?? (await readInstallConfig({ dir, sink }));
  const platform = platformFor(config);
  const load = platform.hooks?.loadImages;
  if (!load) {
    throw new UsageError(`The ${platform.name} platform's nodes pull their images from registries: there is nothing to load them onto`, {
      hint: 'Push the image to a registry the nodes reach and refer to it there.',
    });
  }
  const external = await recordedExternalManagement(dir);
  if (external) {
    // Archives reach the nodes from the install's local control plane, which a cluster managed from elsewhere no longer has.
    const managedBy = isSelfManaged(dir, external) ? 'manages itself' : `is managed by the cluster of ${external}`;
    throw new EnvironmentError(`The cluster of ${dir} ${managedBy}: there is no local control plane to serve image archives to its nodes`, {
      hint: 'Import the archive on each node with `ctr -n k8s.io images import <archive>`, or push the image to a registry the nodes reach.',
    });
  }
  // Every archive is checked before anything is served: a bad one changes nothing.
  const kept: LoadedImage[] = [];
  for (const archive of request.archives) {
    const artifact = await keepLoadedImage(controlPlaneLayout(dir).artifactsDir, archive);
    kept.push({ file: archive, sha256: artifact.sha256, refs: artifact.refs ?? [] });
    log(sink, 'info', `${archive}: ${(artifact.refs ?? []).join(', ')} (sha256:${artifact.sha256.slice(0, 12)}…)`);
  }
  const management = await attachManagement({ dir, config, detached: platform.lifecycle.machinesInController, sink, signal });
  try {
    const nodeArtifacts = () => prepareNodeArtifactsFor({ dir, sink, signal });
    const served = await nodeArtifacts();
    const wanted = new Set(kept.map((k) => k.sha256));
    await load(
      {
        config,
        dir,
        kubeconfig: management.kubeconfig,
        signal,
        log: (message) => log(sink, 'info', message),
        events: sink,
        nodeArtifacts,
        ...(request.noProgressTimeoutMs ? { noProgressTimeoutMs: request.noProgressTimeoutMs } : {}),
      },
      served.filter((artifact) => wanted.has(artifact.sha256) && artifact.path.startsWith('node/loaded/')),
    );
  } finally {
    if (platform.lifecycle.machinesInController || management.adopted) management.client.close();
    else await management.stop();
  }
  return kept;
}

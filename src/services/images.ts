/**
 * `images load`: image archives onto every node of an install's cluster and onto nodes that
 * join it later, without a registry (what `kind load image-archive` is for kind). The local
 * control plane keeps each archive by digest among the node artifacts its forwarder serves;
 * the platform puts them on its nodes (on hosts: a NodePlan per host that downloads them by
 * digest and imports them; src/nodeartifacts/load.ts). Running it again with the same
 * archives runs nothing twice.
 */
import path from 'node:path';
import { checkImageArchives, loadImagesLocked, type LoadedImage, type LoadImagesRequest } from '../nodeartifacts/load.js';
import { acquireDirLock } from '../process/lock.js';

export type { LoadedImage, LoadImagesRequest } from '../nodeartifacts/load.js';

export async function loadImages(request: LoadImagesRequest): Promise<LoadedImage[]> {
  const dir = path.resolve(request.dir);
  await checkImageArchives(request.archives);
  const lock = await acquireDirLock(dir, { command: 'images load', events: request.sink });
  try {
    return await loadImagesLocked({ ...request, dir });
  } finally {
    await lock.release();
  }
}

/**
 * The images of Kubernetes' e2e suite (the bundle's test-only e2e.test) that we build from the
 * bundle, named the way the suite's image manifest (k8s.io/kubernetes@v1.36.3
 * test/utils/image/manifest.go) names them once `KUBE_TEST_REPO_LIST` (`e2eRepoList`) points
 * every registry at `provisioner.local`:
 *  - `provisioner.local/agnhost:2.63.0` (manifest's Agnhost): the bundle's agnhost (built at the
 *    bundled Kubernetes version) as /agnhost, Entrypoint /agnhost and Cmd `pause` like upstream's,
 *    with busybox's applets in /bin and curl and nc (e2e-tools.ts) in /usr/local/bin: the framework
 *    runs `sh -c "curl ..."` and `nc` inside agnhost pods, and upstream's image is Alpine with both.
 *    Debian's busybox-static runs its own applet for a command before searching PATH (its sh is
 *    built standalone), so this image's copy has its `nc` applet renamed `nd` (`renameNcApplet`)
 *    and the nc script runs `busybox nd`;
 *  - `provisioner.local/busybox:1.37.0-1` (BusyBox): Debian's busybox-static from the bundle's
 *    userland layer, at /bin/busybox with every applet it lists linked beside it, `sh` as Cmd
 *    like the upstream image (Debian's build is 1.35.0; the tag is the manifest's, which is what
 *    the suite asks containerd for);
 *  - `provisioner.local/pause:3.10.2` (Pause): our pause, already on every node as a node image.
 * Every other image the suite names stays unavailable: the tests that need one cannot run here.
 */
import { createHash } from 'node:crypto';
import { mkdir, readFile, rename, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { execa } from 'execa';
import * as tar from 'tar';
import { writeFileAtomic } from '../files.js';
import { curlShim, ncShim } from './e2e-tools.js';
import { imageRepository, kubeadmPauseTag, type NodeBinary, type NodeLayer } from './node-images.js';
import { sha256OfFile } from '../files.js';
import { writeImageArchive, type ImageFile, type ImageSpec, type WrittenImage } from './oci-image.js';

/** The agnhost tag of the e2e manifest (Agnhost). No test reads manifest.go: the conformance tier fails if the suite asks for another tag. */
export const e2eAgnhostTag = '2.63.0';
/** The busybox tag of the e2e manifest (BusyBox). */
export const e2eBusyboxTag = '1.37.0-1';

/** The e2e images we build (or that nodes already have), by the ref e2e.test runs them as. */
export const e2eImageRefs = {
  agnhost: `${imageRepository}/agnhost:${e2eAgnhostTag}`,
  busybox: `${imageRepository}/busybox:${e2eBusyboxTag}`,
  pause: `${imageRepository}/pause:${kubeadmPauseTag}`,
} as const;

/**
 * The `KUBE_TEST_REPO_LIST` file's content: every registry key of the manifest's RegistryList
 * (its YAML names) at `provisioner.local`, so no image of the suite is ever pulled from elsewhere
 * (a test whose image we lack fails to start its pod instead of reaching the internet).
 */
export const e2eRepoList = [
  'promoterE2eRegistry', 'buildImageRegistry', 'invalidRegistry', 'gcEtcdRegistry', 'gcRegistry',
  'sigStorageRegistry', 'privateRegistry', 'dockerLibraryRegistry', 'cloudProviderGcpRegistry',
].map((key) => `${key}: ${imageRepository}\n`).join('');

/** Bumped when an image's content or layout changes, so cached archives are rebuilt. */
const e2eImagesRevision = '2';

export interface E2eImageArchive extends WrittenImage {
  name: 'agnhost' | 'busybox';
  /** The ref e2e.test runs it as (`e2eImageRefs`). */
  ref: string;
  cached: boolean;
}

export interface E2eImagesOptions {
  /** Cache directory (the binary cache's root); archives go to `<cacheDir>/images/`. */
  cacheDir: string;
  architecture: ImageSpec['architecture'];
}

/**
 * Builds (or takes from `<cacheDir>/images/<key>/`, keyed by the agnhost binary's and the
 * layer's sha256) the agnhost and busybox images of the module comment. Linux only: the
 * applets linked are what the layer's busybox prints for `busybox --list`, so it runs here.
 */
export async function ensureE2eImages(agnhost: NodeBinary, userland: NodeLayer, options: E2eImagesOptions): Promise<E2eImageArchive[]> {
  const agnhostSha256 = agnhost.sha256 ?? (await sha256OfFile(agnhost.path));
  const key = createHash('sha256').update(JSON.stringify({ e2eImagesRevision, agnhost: agnhostSha256, layer: userland.sha256, refs: e2eImageRefs, architecture: options.architecture })).digest('hex');
  const dir = path.join(options.cacheDir, 'images', `e2e-${key}`);
  const names = ['agnhost', 'busybox'] as const;
  const cached = await Promise.all(names.map((name) => readCached(dir, name)));
  if (cached.every((c) => c !== undefined)) return cached;

  await mkdir(dir, { recursive: true });
  const busybox = await extractBusybox(userland.path, dir);
  const agnhostBusybox = path.join(dir, 'busybox-agnhost');
  await writeFileAtomic(agnhostBusybox, renameNcApplet(await readFile(busybox)), 0o755);
  const linksOf = async (binary: string) => {
    const { stdout } = await execa(binary, ['--list']);
    const applets = stdout.split('\n').map((line) => line.trim()).filter((name) => /^[\w.[-]+$/.test(name) && name !== 'busybox');
    return applets.map((name) => ({ path: `/bin/${name}`, target: 'busybox' }));
  };
  const tools: ImageFile[] = [];
  for (const [name, content] of [['curl', curlShim], ['nc', ncShim]] as const) {
    const file = path.join(dir, `${name}.sh`);
    await writeFileAtomic(file, content, 0o755);
    tools.push({ sourcePath: file, path: `/usr/local/bin/${name}` });
  }
  const specs: Record<(typeof names)[number], ImageSpec> = {
    agnhost: {
      name: 'agnhost', files: [{ sourcePath: agnhost.path, path: '/agnhost' }, { sourcePath: agnhostBusybox, path: '/bin/busybox' }, ...tools],
      symlinks: await linksOf(agnhostBusybox), entrypoint: ['/agnhost'], cmd: ['pause'], refs: [e2eImageRefs.agnhost], os: 'linux', architecture: options.architecture,
    },
    busybox: {
      name: 'busybox', files: [{ sourcePath: busybox, path: '/bin/busybox' }],
      symlinks: await linksOf(busybox), entrypoint: [], cmd: ['sh'], refs: [e2eImageRefs.busybox], os: 'linux', architecture: options.architecture,
    },
  };
  const result: E2eImageArchive[] = [];
  for (const name of names) {
    const file = path.join(dir, `${name}.tar`);
    const written = await writeImageArchive(specs[name], file);
    await writeFileAtomic(path.join(dir, `${name}.json`), JSON.stringify({ ...written, file: path.basename(file) }, null, 2));
    result.push({ ...written, name, ref: e2eImageRefs[name], cached: false });
  }
  await rm(busybox, { force: true });
  await rm(agnhostBusybox, { force: true });
  return result;
}

/**
 * busybox with its `nc` applet named `nd`: one byte of the applet name table, whose order
 * (searched by bisection) stays sorted (nameif < nd < netstat). Throws unless the table holds
 * exactly that neighbourhood once, so another busybox is never patched blindly.
 */
export function renameNcApplet(binary: Buffer): Buffer {
  const table = Buffer.from('\0nameif\0nc\0netstat\0', 'latin1');
  const at = binary.indexOf(table);
  if (at < 0 || binary.indexOf(table, at + 1) >= 0) throw new Error('busybox: its applet name table does not hold nameif, nc, netstat exactly once; the nc applet cannot be renamed');
  const patched = Buffer.from(binary);
  patched[at + '\0nameif\0n'.length] = 'd'.charCodeAt(0);
  return patched;
}

/** An archive of a previous build whose record and file agree, else undefined. */
async function readCached(dir: string, name: E2eImageArchive['name']): Promise<E2eImageArchive | undefined> {
  try {
    const record = JSON.parse(await readFile(path.join(dir, `${name}.json`), 'utf8')) as WrittenImage;
    const file = path.join(dir, `${name}.tar`);
    if ((await stat(file)).size !== record.size) return undefined;
    return { ...record, file, name, ref: e2eImageRefs[name], cached: true };
  } catch {
    return undefined; // not built yet, or cut short
  }
}

/** Extracts `bin/busybox` of the layer tar into `dir` and returns its path. */
async function extractBusybox(layerTar: string, dir: string): Promise<string> {
  const scratch = path.join(dir, `extract.${process.pid}`);
  await rm(scratch, { recursive: true, force: true });
  await mkdir(scratch, { recursive: true });
  await tar.x({ file: layerTar, cwd: scratch, filter: (entry) => entry.replace(/^\.?\//, '') === 'bin/busybox' });
  const target = path.join(dir, 'busybox');
  try {
    await rename(path.join(scratch, 'bin', 'busybox'), target);
  } catch (error) {
    throw new Error(`the userland layer ${layerTar} holds no bin/busybox`, { cause: error });
  } finally {
    await rm(scratch, { recursive: true, force: true });
  }
  return target;
}

/**
 * The node images, built from the real bundled binaries and imported into a real
 * containerd (Debian's containerd and runc; .ci/run installs them): every archive imports
 * under its refs, the refs are the ones the bundled kubeadm asks for, and the images run
 * (a static binary alone in its image; pause exits 0 on SIGTERM; CoreDNS, flanneld, the
 * flannel CNI plugin and agnhost report themselves; the nft iptables of the userland
 * layer works in the kube-proxy and flannel images, each in a network namespace of the
 * test's own).
 *
 * The containerd is the test's own: its own root, state, socket and runc root under a
 * temporary directory, CRI off; it is stopped at the end. Fails (never skips) when the
 * bundle or containerd is missing.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdir, mkdtemp, rm, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { sleep } from '../../src/concurrency.js';
import { execa } from 'execa';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ensureBinaries, ensureLayer } from '../../src/embedded/cache.js';
import { loadCatalog, packageRoot } from '../../src/embedded/catalog.js';
import { messageOf } from '../../src/errors.js';
import {
  corednsImageTag,
  ensureAgnhostImage,
  ensureNodeImages,
  flannelImageTag,
  imageRepository,
  nodeImageBinaries,
  nodeImageNames,
  userlandLayerName,
  type NodeImageArchive,
} from '../../src/nodeartifacts/node-images.js';

const arch = ({ x64: 'amd64', arm64: 'arm64' } as const)[process.arch as 'x64' | 'arm64'];

describe('node images in a real containerd', () => {
  let scratch = '';
  let socket = '';
  let containerd: ChildProcess | undefined;
  let containerdLog = '';
  let images: NodeImageArchive[] = [];
  let agnhost: NodeImageArchive | undefined;
  let kubeadm = '';
  let kubeBinary = '';
  let setupError: Error | undefined;

  const ctr = (...args: string[]) => execa('ctr', ['--address', socket, '--namespace', 'k8s.io', ...args], { timeout: 120_000 });

  beforeAll(async () => {
    for (const tool of ['containerd', 'ctr', 'runc']) {
      if ((await execa('sh', ['-c', `command -v ${tool}`], { reject: false })).exitCode !== 0) {
        setupError = new Error(`${tool} is not installed: apt-get install -y containerd runc (as .ci/run does)`);
        return;
      }
    }
    let catalog;
    try {
      catalog = await loadCatalog();
    } catch (error) {
      setupError = new Error(`No usable bundle (${messageOf(error)}). Run \`npm run bundle\` in ${packageRoot} first.`);
      return;
    }
    const imageBinaries = [...new Set(nodeImageNames.flatMap((n) => nodeImageBinaries(n)))];
    const names = [...imageBinaries, 'kubeadm', 'agnhost'];
    const missing = names.filter((n) => !catalog.findBinary(n));
    if (missing.length > 0) {
      setupError = new Error(`The bundle lacks ${missing.join(', ')}: run \`npm run bundle\` in ${packageRoot}.`);
      return;
    }
    scratch = await mkdtemp(path.join(os.tmpdir(), 'provisioner-node-images-'));
    const paths = await ensureBinaries(names, { catalog });
    kubeadm = paths.kubeadm!;
    kubeBinary = paths.kube!;
    const userland = await ensureLayer(catalog, userlandLayerName, { catalog, cacheDir: path.join(scratch, 'cache') });
    const binary = (n: string) => ({ path: paths[n]!, version: catalog.binary(n).version });
    const options = { cacheDir: path.join(scratch, 'cache'), architecture: arch! };
    images = await ensureNodeImages(Object.fromEntries(imageBinaries.map((n) => [n, binary(n)])), {
      ...options,
      userland: { path: userland.path, sha256: userland.layer.sha256, description: `${userlandLayerName}: test` },
    });
    agnhost = await ensureAgnhostImage(binary('agnhost'), options);

    const config = path.join(scratch, 'config.toml');
    socket = path.join(scratch, 'containerd.sock');
    await writeFile(
      config,
      [
        'version = 2',
        `root = "${scratch}/root"`,
        `state = "${scratch}/state"`,
        // Only images and ctr's own containers here; the CRI plugin would want CNI and more.
        'disabled_plugins = ["io.containerd.grpc.v1.cri"]',
        '[grpc]',
        `  address = "${socket}"`,
        '[ttrpc]',
        `  address = "${scratch}/containerd.sock.ttrpc"`,
        '',
      ].join('\n'),
    );
    containerd = spawn('containerd', ['--config', config], { stdio: ['ignore', 'pipe', 'pipe'] });
    containerd.stdout!.on('data', (d: Buffer) => (containerdLog += d.toString()));
    containerd.stderr!.on('data', (d: Buffer) => (containerdLog += d.toString()));
    for (let i = 0; ; i++) {
      if ((await ctr('version').then(() => true, () => false))) break;
      if (i === 100 || containerd.exitCode !== null) {
        setupError = new Error(`containerd did not start:\n${containerdLog.slice(-2000)}`);
        return;
      }
      await sleep(100);
    }
  });

  beforeEach(() => {
    if (setupError) throw setupError;
  });

  afterAll(async () => {
    if (containerd && containerd.exitCode === null) {
      // Containers first (their shims outlive containerd otherwise), then containerd.
      const listed = await ctr('tasks', 'ls', '-q').catch(() => ({ stdout: '' }));
      for (const id of listed.stdout.split('\n').filter(Boolean)) await ctr('tasks', 'kill', '-s', 'SIGKILL', id).catch(() => undefined);
      const exited = new Promise((resolve) => containerd!.once('exit', resolve));
      containerd.kill('SIGTERM');
      await Promise.race([exited, sleep(10_000).then(() => containerd!.kill('SIGKILL'))]);
    }
    // Snapshots are overlay mounts only while containers run; none is left, so the tree removes.
    if (scratch) await rm(scratch, { recursive: true, force: true });
  });

  it('imports every archive under its refs, with the manifest digest the writer computed', async () => {
    expect(images.map((i) => i.name)).toEqual([...nodeImageNames]);
    // The four Kubernetes images are one archive, kubernetes.tar, holding kube once.
    const kubernetes = images.filter((i) => i.archive === 'kubernetes');
    expect(kubernetes.map((i) => i.name)).toEqual(['kube-apiserver', 'kube-controller-manager', 'kube-scheduler', 'kube-proxy']);
    expect(new Set(kubernetes.map((i) => i.file))).toEqual(new Set([path.join(path.dirname(kubernetes[0]!.file), 'kubernetes.tar')]));
    const kube = (await stat(kubeBinary)).size;
    expect(kubernetes[0]!.size).toBeLessThan(kube * 0.5); // one gzipped kube (about 29 %) and the userland layer, not four
    const all = [...images, agnhost!];
    for (const image of all) {
      const imported = await ctr('images', 'import', image.file);
      expect(imported.exitCode, imported.stdout + imported.stderr).toBe(0);
    }
    const listed = (await ctr('images', 'ls')).stdout;
    const rows = listed.split('\n').slice(1).filter(Boolean).map((line) => line.split(/\s+/));
    for (const image of all) {
      for (const ref of image.refs) {
        const row = rows.find((r) => r[0] === ref);
        expect(row, `${ref} in ctr images ls:\n${listed}`).toBeDefined();
        expect(row![2]).toBe(image.manifestDigest);
      }
    }
    // kube is every Kubernetes image's lowest layer, so containerd unpacked it once: one
    // snapshot of kube's size, where userland under kube-proxy's kube made a second one.
    const usage = (await ctr('snapshots', 'usage')).stdout;
    const kubeSized = usage.split('\n').slice(1).filter((line) => snapshotBytes(line) >= kube * 0.9);
    expect(kubeSized, `snapshots of kube's size (${kube} bytes) in ctr snapshots usage:\n${usage}`).toHaveLength(1);
    // Importing again changes nothing (same digests): the archives are content-addressed.
    await ctr('images', 'import', images[0]!.file);
    expect((await ctr('images', 'ls')).stdout.split('\n').filter(Boolean).length).toBe(listed.split('\n').filter(Boolean).length);
  });

  it('covers what the bundled kubeadm lists for its version, CoreDNS included', async () => {
    const version = images.find((i) => i.name === 'kube-apiserver')!.ref.split(':')[1]!;
    const listed = await execa(kubeadm, ['config', 'images', 'list', '--kubernetes-version', version, '--image-repository', imageRepository]);
    const wanted = listed.stdout.split('\n').map((l) => l.trim()).filter(Boolean);
    expect(wanted.length).toBe(7);
    expect(wanted).toContain(`${imageRepository}/coredns:${corednsImageTag}`);
    const ours = images.flatMap((i) => i.refs);
    expect(wanted.filter((ref) => !ours.includes(ref)), `kubeadm lists:\n${listed.stdout}`).toEqual([]);
  });

  it('runs a static binary alone in its image, and pause until SIGTERM, when it exits 0', async () => {
    const runcRoot = path.join(scratch, 'runc');
    await mkdir(runcRoot, { recursive: true });
    const proxy = images.find((i) => i.name === 'kube-proxy')!;
    const ran = await ctr('run', '--rm', '--runc-root', runcRoot, '--cgroup', '', proxy.ref, 'provisioner-it-proxy', 'kube-proxy', '--version');
    expect(ran.stdout.trim()).toBe(`Kubernetes ${proxy.ref.split(':')[1]}`);
    // kube runs the component it is called as: kube-scheduler from its own image, by its link.
    const scheduler = images.find((i) => i.name === 'kube-scheduler')!;
    const help = await ctr('run', '--rm', '--runc-root', runcRoot, '--cgroup', '', scheduler.ref, 'provisioner-it-scheduler', '/usr/local/bin/kube-scheduler', '--help');
    expect(help.stdout).toMatch(/^The Kubernetes scheduler is a control plane process/);

    const pause = images.find((i) => i.name === 'pause')!;
    const run = ctr('run', '--rm', '--runc-root', runcRoot, '--cgroup', '', pause.ref, 'provisioner-it-pause');
    let state = '';
    for (let i = 0; i < 100 && !state.includes('RUNNING'); i++) {
      await sleep(100);
      state = (await ctr('tasks', 'ls').catch(() => ({ stdout: '' }))).stdout;
    }
    expect(state).toMatch(/provisioner-it-pause\s+\d+\s+RUNNING/);
    await ctr('tasks', 'kill', '-s', 'SIGTERM', 'provisioner-it-pause');
    const finished = await run;
    expect(finished.exitCode).toBe(0);
    expect((await ctr('containers', 'ls', '-q')).stdout.trim()).toBe('');
    // The images were written into the test's cache; the layer is small next to the binary.
    expect((await stat(pause.file)).size).toBe(pause.size);
  });

  it('runs CoreDNS, flanneld, the flannel CNI plugin and agnhost, which report themselves', async () => {
    const runcRoot = path.join(scratch, 'runc');
    await mkdir(runcRoot, { recursive: true });
    const run = async (name: string, id: string, ...args: string[]) => {
      const image = [...images, agnhost!].find((i) => i.name === name)!;
      const ran = await execa('ctr', ['--address', socket, '--namespace', 'k8s.io', 'run', '--rm', '--runc-root', runcRoot, '--cgroup', '', image.ref, id, ...args], { timeout: 120_000, reject: false });
      return { exitCode: ran.exitCode, output: `${ran.stdout}\n${ran.stderr}` };
    };
    const coredns = await run('coredns', 'provisioner-it-coredns', '/coredns', '-version');
    expect(coredns).toMatchObject({ exitCode: 0, output: expect.stringContaining(`CoreDNS-${corednsImageTag.replace(/^v/, '')}`) });
    const flanneld = await run('flannel', 'provisioner-it-flanneld', '/opt/bin/flanneld', '--version');
    expect(flanneld).toMatchObject({ exitCode: 0, output: expect.stringContaining(flannelImageTag) });
    // No CNI_COMMAND: the plugin prints what it is and exits 0.
    const plugin = await run('flannel', 'provisioner-it-flannel-cni', '/flannel');
    expect(plugin).toMatchObject({ exitCode: 0, output: expect.stringMatching(/CNI flannel plugin v\d/) });
    const test = await run('agnhost', 'provisioner-it-agnhost', '/agnhost', '--help');
    expect(test).toMatchObject({ exitCode: 0, output: expect.stringContaining('netexec') });
  });

  it('runs nft iptables from the userland layer in the kube-proxy and flannel images, in a network namespace of its own', async () => {
    const runcRoot = path.join(scratch, 'runc');
    await mkdir(runcRoot, { recursive: true });
    const namespace = `provisioner-test-${process.pid}-iptables`;
    await execa('ip', ['netns', 'add', namespace]);
    try {
      // Privileged for CAP_NET_ADMIN, but only in the namespace made here: the host's rules are never touched.
      const run = (name: string, id: string, script: string) =>
        execa(
          'ctr',
          ['--address', socket, '--namespace', 'k8s.io', 'run', '--rm', '--runc-root', runcRoot, '--cgroup', '', '--privileged', '--with-ns', `network:/var/run/netns/${namespace}`, images.find((i) => i.name === name)!.ref, id, '/bin/sh', '-c', script],
          { timeout: 120_000, reject: false },
        );
      // kube-proxy's calls: iptables (nft) makes a chain, iptables-save shows it.
      const proxy = await run('kube-proxy', 'provisioner-it-proxy-iptables', 'iptables -t nat -N PROVISIONER-TEST && iptables-save -t nat && ip6tables-save -t nat >/dev/null && iptables-restore --version');
      expect(proxy.exitCode, proxy.stderr).toBe(0);
      expect(proxy.stdout).toMatch(/# Generated by iptables-save v1\.8\.\d+ \(nf_tables\)/);
      expect(proxy.stdout).toContain(':PROVISIONER-TEST - [0:0]');
      expect(proxy.stdout).toMatch(/iptables-restore v1\.8\.\d+ \(nf_tables\)/);
      // flannel's: iptables -t nat -L, and the busybox cp its init container runs (into a hostPath mount there; a new directory here).
      const flannel = await run('flannel', 'provisioner-it-flannel-iptables', 'iptables -t nat -L -n && mkdir -p /host/opt/cni/bin && cp -f /flannel /host/opt/cni/bin/flannel && ls /host/opt/cni/bin/flannel');
      expect(flannel.exitCode, flannel.stderr).toBe(0);
      expect(flannel.stdout).toContain('Chain POSTROUTING (policy ACCEPT)');
      expect(flannel.stdout).toContain('PROVISIONER-TEST'); // the same namespace: the chain kube-proxy's image made
      expect(flannel.stdout).toContain('/host/opt/cni/bin/flannel');
    } finally {
      await execa('ip', ['netns', 'del', namespace], { reject: false });
    }
  });
});

/** The size of a row of `ctr snapshots usage` (`KEY  141.7 MiB  9`) in bytes, 0 for the header or a row it cannot read. */
function snapshotBytes(row: string): number {
  const match = /\s(\d+(?:\.\d+)?)\s*(B|KiB|MiB|GiB)\s/.exec(`${row} `);
  if (!match) return 0;
  const unit = { B: 1, KiB: 1024, MiB: 1024 ** 2, GiB: 1024 ** 3 }[match[2] as 'B' | 'KiB' | 'MiB' | 'GiB'];
  return Number(match[1]) * unit;
}

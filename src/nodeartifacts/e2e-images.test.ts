import { execFileSync } from 'node:child_process';
import { chmod, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { gunzipSync } from 'node:zlib';
import * as tar from 'tar';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { e2eImageRefs, e2eRepoList, ensureE2eImages, renameNcApplet } from './e2e-images.js';
import { sha256OfFile } from '../files.js';
import { readArchiveMember } from './oci-image.js';

let dir = '';
beforeEach(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'e2e-images-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** A userland layer whose bin/busybox is a script answering `--list` with three applets. */
async function fakeLayer(): Promise<{ path: string; sha256: string; description: string }> {
  const root = path.join(dir, 'layer');
  await mkdir(path.join(root, 'bin'), { recursive: true });
  // Answers --list like busybox, renamed or not (the name table at its end is what renameNcApplet edits).
  await writeFile(path.join(root, 'bin', 'busybox'), Buffer.concat([
    Buffer.from('#!/bin/sh\nprintf "sh\\nwget\\n[\\n"; tr "\\000" "\\n" < "$0" | sed -n "/^n[cd]$/p"\nexit 0\n'),
    Buffer.from('\0nameif\0nc\0netstat\0', 'latin1'),
  ]));
  await chmod(path.join(root, 'bin', 'busybox'), 0o755);
  await writeFile(path.join(root, 'bin', 'other'), 'not busybox');
  const file = path.join(dir, 'userland.tar');
  await tar.c({ file, cwd: root }, ['bin']);
  return { path: file, sha256: await sha256OfFile(file), description: 'userland: test' };
}

interface ImageView { config: { Entrypoint?: string[]; Cmd?: string[] }; layer: Map<string, { type: string; linkpath?: string; content?: string }> }

/** The config and the one layer's entries of an image archive. */
async function view(archive: string): Promise<ImageView> {
  const member = async (name: string) => (await readArchiveMember(archive, name))!;
  const index = JSON.parse((await member('index.json')).toString()) as { manifests: { digest: string }[] };
  const manifest = JSON.parse((await member(`blobs/sha256/${index.manifests[0]!.digest.slice(7)}`)).toString()) as { config: { digest: string }; layers: { digest: string }[] };
  const config = JSON.parse((await member(`blobs/sha256/${manifest.config.digest.slice(7)}`)).toString()) as { config: ImageView['config'] };
  expect(manifest.layers).toHaveLength(1);
  const layerFile = path.join(dir, `layer-${Math.random()}.tar`);
  await writeFile(layerFile, gunzipSync(await member(`blobs/sha256/${manifest.layers[0]!.digest.slice(7)}`)));
  const layer: ImageView['layer'] = new Map();
  await tar.t({
    file: layerFile,
    onReadEntry: (entry) => {
      const item: { type: string; linkpath?: string; content?: string } = { type: entry.type, ...(entry.linkpath ? { linkpath: entry.linkpath } : {}) };
      const chunks: Buffer[] = [];
      entry.on('data', (chunk: Buffer) => chunks.push(chunk));
      entry.on('end', () => {
        if (entry.type === 'File') item.content = Buffer.concat(chunks).toString();
      });
      layer.set(entry.path, item);
    },
  });
  return { config: config.config, layer };
}

describe('e2e images', () => {
  it('agnhost and busybox under the refs of e2e\'s image manifest, every busybox applet linked in /bin', async () => {
    const agnhost = path.join(dir, 'agnhost');
    await writeFile(agnhost, 'agnhost');
    const layer = await fakeLayer();
    const images = await ensureE2eImages({ path: agnhost, version: 'v1.36.3' }, layer, { cacheDir: path.join(dir, 'cache'), architecture: 'amd64' });
    expect(images.map((i) => [i.name, i.ref, i.cached])).toEqual([
      ['agnhost', 'provisioner.local/agnhost:2.63.0', false],
      ['busybox', 'provisioner.local/busybox:1.37.0-1', false],
    ]);
    expect(e2eImageRefs.pause).toBe('provisioner.local/pause:3.10.2');

    const busybox = await view(images[1]!.file);
    // As upstream's busybox: no Entrypoint, `sh` by default, so a pod's args alone run as the command.
    expect(busybox.config).toMatchObject({ Cmd: ['sh'] });
    expect(busybox.config.Entrypoint).toBeUndefined();
    expect([...busybox.layer.keys()].sort()).toEqual(['bin/', 'bin/[', 'bin/busybox', 'bin/nc', 'bin/sh', 'bin/wget']);
    expect(busybox.layer.get('bin/sh')).toEqual({ type: 'SymbolicLink', linkpath: 'busybox' });

    const agnhostImage = await view(images[0]!.file);
    expect(agnhostImage.config).toMatchObject({ Entrypoint: ['/agnhost'], Cmd: ['pause'] });
    expect(agnhostImage.layer.get('agnhost')?.content).toBe('agnhost');
    expect(agnhostImage.layer.get('bin/wget')).toEqual({ type: 'SymbolicLink', linkpath: 'busybox' });
    expect(agnhostImage.layer.get('usr/local/bin/curl')?.content).toMatch(/^#!\/bin\/sh\n/);
    expect(agnhostImage.layer.get('usr/local/bin/nc')?.content).toMatch(/exec \/bin\/busybox nd /);
    // The shell of agnhost's busybox finds nc on PATH (the script): its applet is nd.
    expect(agnhostImage.layer.get('bin/nd')).toEqual({ type: 'SymbolicLink', linkpath: 'busybox' });
    expect(agnhostImage.layer.has('bin/nc')).toBe(false);
    expect(agnhostImage.layer.get('bin/busybox')?.content).toContain('\0nameif\0nd\0netstat\0');

    const again = await ensureE2eImages({ path: agnhost, version: 'v1.36.3' }, layer, { cacheDir: path.join(dir, 'cache'), architecture: 'amd64' });
    expect(again.map((i) => [i.cached, i.sha256])).toEqual(images.map((i) => [true, i.sha256]));
  });

  it('the curl and nc scripts are valid sh', async () => {
    const agnhost = path.join(dir, 'agnhost');
    await writeFile(agnhost, 'agnhost');
    const [image] = await ensureE2eImages({ path: agnhost, version: 'v1.36.3' }, await fakeLayer(), { cacheDir: path.join(dir, 'cache'), architecture: 'amd64' });
    const layer = (await view(image!.file)).layer;
    for (const tool of ['curl', 'nc']) {
      const script = path.join(dir, tool);
      await writeFile(script, layer.get(`usr/local/bin/${tool}`)!.content!);
      execFileSync('sh', ['-n', script]);
      // Options the e2e framework never passes are refused, not guessed.
      let status = 0;
      try {
        execFileSync('sh', [script, '--unknown-option', 'x'], { stdio: 'ignore' });
      } catch (error) {
        status = (error as { status: number }).status;
      }
      expect(status, tool).toBe(2);
    }
  });

  it('renames busybox\'s nc applet only where the name table holds it exactly once', () => {
    expect(renameNcApplet(Buffer.from('x\0nameif\0nc\0netstat\0y', 'latin1')).toString('latin1')).toBe('x\0nameif\0nd\0netstat\0y');
    expect(() => renameNcApplet(Buffer.from('no table'))).toThrow(/cannot be renamed/);
    expect(() => renameNcApplet(Buffer.from('\0nameif\0nc\0netstat\0\0nameif\0nc\0netstat\0', 'latin1'))).toThrow(/cannot be renamed/);
  });

  it('KUBE_TEST_REPO_LIST points every registry of the manifest at provisioner.local', () => {
    const lines = e2eRepoList.trim().split('\n');
    expect(lines).toHaveLength(9);
    for (const line of lines) expect(line).toMatch(/^[a-zA-Z0-9]+Registry: provisioner\.local$/);
    expect(lines).toContain('promoterE2eRegistry: provisioner.local');
    expect(lines).toContain('gcRegistry: provisioner.local');
  });
});

/**
 * One command reads install-config.yaml once: the service loads it (and validates it) at one
 * place and hands the loaded config to everything downstream. Every open of the file is
 * counted (node:fs/promises is wrapped), and the attach of the management cluster is
 * intercepted: what is counted is everything a command reads up to that point and what it
 * hands on (the self pivot's `management install`, the moved-back control plane).
 */
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { controlPlaneLayout } from '../controlplane/layout.js';
import { nullSink } from '../events.js';
import type { InstallManagement } from '../management/attach.js';

/** Opens of a file named install-config.yaml, by any fs/promises call that reads it. */
const reads: string[] = [];
vi.mock('node:fs/promises', async (importOriginal) => {
  const actual = await importOriginal<typeof import('node:fs/promises')>();
  const counted = (file: unknown): void => {
    if (typeof file === 'string' && path.basename(file) === 'install-config.yaml') reads.push(file);
  };
  const wrapped = {
    ...actual,
    open: (async (file: Parameters<typeof actual.open>[0], ...rest: unknown[]) => {
      counted(file);
      return (actual.open as (...args: unknown[]) => unknown)(file, ...rest);
    }) as typeof actual.open,
    readFile: (async (file: Parameters<typeof actual.readFile>[0], ...rest: unknown[]) => {
      counted(file);
      return (actual.readFile as (...args: unknown[]) => unknown)(file, ...rest);
    }) as typeof actual.readFile,
  };
  return { ...wrapped, default: wrapped };
});

/** Calls of the one loader (`loadInstallConfig`) by a command that also opens the asset store (wait-for, diff): the store is handed what it loaded. */
let loads = 0;
vi.mock('../assets/install-config.js', async (importOriginal) => {
  const actual = await importOriginal<typeof import('../assets/install-config.js')>();
  return {
    ...actual,
    loadInstallConfig: async (...args: Parameters<typeof actual.loadInstallConfig>) => {
      loads += 1;
      return actual.loadInstallConfig(...args);
    },
  };
});

const attached: InstallManagement[] = [];
/** What the next attach gives instead of failing (destroy's moved-back control plane, which destroy then lists Clusters from). */
let attachGives: unknown;
vi.mock('../management/attach.js', async (importOriginal) => {
  const actual = await importOriginal<typeof import('../management/attach.js')>();
  return {
    ...actual,
    attachManagement: async (install: InstallManagement) => {
      attached.push(install);
      if (attachGives) return attachGives;
      throw new Error('attach intercepted');
    },
  };
});
vi.mock('../pivot/back.js', async (importOriginal) => ({ ...(await importOriginal<typeof import('../pivot/back.js')>()), pivotBack: async () => undefined, refuseWhileManagingOthers: async () => undefined }));
/** The self pivot's `management install` (which read the file again for its controllers) is intercepted: what it is handed counts. */
const installs: unknown[] = [];
vi.mock('../management/install.js', async (importOriginal) => {
  const actual = await importOriginal<typeof import('../management/install.js')>();
  return {
    ...actual,
    installManagement: async (request: Parameters<typeof actual.installManagement>[0]) => {
      installs.push(request);
      throw new Error('management install intercepted');
    },
  };
});

const { createCluster } = await import('./create-cluster.js');
const { destroyCluster } = await import('./destroy.js');
const { pivot, pivotToSelf } = await import('./pivot.js');
const { waitForInstallComplete } = await import('./wait-for.js');
const { diffManifests } = await import('./diff.js');

const installConfig = `apiVersion: provisioner.dev/v1alpha1
kind: InstallConfig
metadata:
  name: reads
machinePools:
  - name: control-plane
    quantity: 1
    roles: [etcd, controlPlane]
`;
const kubeconfig = `apiVersion: v1
kind: Config
clusters: [{name: t, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: t, user: {token: x}}]
contexts: [{name: t, context: {cluster: t, user: t}}]
current-context: t
`;

let dir = '';
const signal = new AbortController().signal;
beforeEach(async () => {
  reads.length = 0;
  loads = 0;
  attached.length = 0;
  installs.length = 0;
  attachGives = undefined;
  dir = await mkdtemp(path.join(os.tmpdir(), 'provisioner-config-reads-'));
  await writeFile(path.join(dir, 'install-config.yaml'), installConfig);
  await writeFile(path.join(dir, 'target.kubeconfig'), kubeconfig, { mode: 0o600 });
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('install-config.yaml is read once per command', () => {
  it('create cluster: the manifests stage reads it, and the attach gets that config', async () => {
    await expect(createCluster({ dir, sink: nullSink, signal })).rejects.toThrow('attach intercepted');
    expect(reads).toHaveLength(1);
    expect(attached[0]?.config?.metadata.name).toBe('reads');
  });

  it('pivot: one read gives the platform and the config the source starts with', async () => {
    await mkdir(controlPlaneLayout(dir).etcdDataDir, { recursive: true });
    await expect(pivot({ dir, toKubeconfig: path.join(dir, 'target.kubeconfig'), sink: nullSink, signal })).rejects.toThrow('attach intercepted');
    expect(reads).toHaveLength(1);
    expect(attached[0]?.config?.metadata.name).toBe('reads');
  });

  it('pivot --to self: management install is handed the config pivot read', async () => {
    await mkdir(path.join(dir, 'auth'), { recursive: true });
    await writeFile(path.join(dir, 'auth', 'kubeconfig'), kubeconfig, { mode: 0o600 });
    await mkdir(controlPlaneLayout(dir).etcdDataDir, { recursive: true });
    await expect(pivotToSelf({ dir, sink: nullSink, signal })).rejects.toThrow('management install intercepted');
    expect(reads).toHaveLength(1);
    // management install takes its controllers from the config it is given instead of reading the file again.
    expect((installs[0] as { config?: { metadata: { name: string } } }).config?.metadata.name).toBe('reads');
  });

  it('destroy cluster of a self-managed cluster: the move back and the deletion share one read', async () => {
    const { recordExternalManagement } = await import('../installdir/management.js');
    await mkdir(path.join(dir, 'auth'), { recursive: true });
    await writeFile(path.join(dir, 'auth', 'kubeconfig'), kubeconfig, { mode: 0o600 });
    await recordExternalManagement(dir, path.join(dir, 'auth', 'kubeconfig'));
    // The temporary control plane the cluster moves back into (with its data); the deletion's first list ends the run.
    await mkdir(controlPlaneLayout(dir).etcdDataDir, { recursive: true });
    attachGives = {
      kubeconfig: path.join(dir, 'target.kubeconfig'),
      client: { list: async () => Promise.reject(new Error('list intercepted')), close: () => undefined },
      fatal: new Promise(() => undefined),
      stop: async () => undefined,
    };
    await expect(destroyCluster({ dir, sink: nullSink, signal })).rejects.toThrow('list intercepted');
    expect(attached).toHaveLength(1);
    expect(attached[0]?.config?.metadata.name).toBe('reads');
    expect(reads).toHaveLength(1);
  });

  it('wait-for install-complete: the one loader reads it, the asset store is handed it for the manifests, and the attach gets it', async () => {
    await mkdir(controlPlaneLayout(dir).etcdDataDir, { recursive: true });
    await expect(waitForInstallComplete({ dir, sink: nullSink, signal })).rejects.toThrow('attach intercepted');
    expect([reads.length, loads]).toEqual([1, 1]);
    expect(attached[0]?.config?.metadata.name).toBe('reads');
  });

  it('diff: the one loader reads it and the asset store is handed it', async () => {
    const result = await diffManifests({ dir, sink: nullSink });
    expect(result.files.length).toBeGreaterThan(0); // nothing written yet: every manifest is one create manifests would write
    expect([reads.length, loads]).toEqual([1, 1]);
  });
});

/**
 * `--pivot-to self` and `pivot --to self` name the install's own cluster: its kubeconfig in
 * `auth/`, which destroy, create cluster and the self pivot's data removal compare against. A
 * self pivot run again after its move finished removes the local control plane's data that a
 * run killed between the move and the removal left.
 */
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { controlPlaneLayout } from '../controlplane/layout.js';
import { nullSink } from '../events.js';
import { writePivotJournal } from '../pivot/journal.js';
import { pivotTargetKubeconfig, selfTarget } from '../pivot/target.js';
import { pivotToSelf } from './pivot.js';

describe('pivotTargetKubeconfig', () => {
  it('self is the install directory\'s own auth/kubeconfig, absolute', () => {
    expect(pivotTargetKubeconfig('demo', selfTarget)).toBe(path.resolve('demo', 'auth', 'kubeconfig'));
  });

  it('anything else is the kubeconfig file it names, resolved', () => {
    expect(pivotTargetKubeconfig('/work/demo', 'mgmt/auth/management.kubeconfig')).toBe(path.resolve('mgmt/auth/management.kubeconfig'));
    expect(pivotTargetKubeconfig('/work/demo', './self')).toBe(path.resolve('self'));
  });
});

describe('pivotToSelf after a finished move', () => {
  let dir = '';
  beforeEach(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'pivot-self-'));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('removes the local control plane data a run killed after the move left, and says there is nothing to move', async () => {
    const kubeconfig = pivotTargetKubeconfig(dir, selfTarget);
    await mkdir(path.dirname(kubeconfig), { recursive: true });
    await writeFile(kubeconfig, 'apiVersion: v1\nkind: Config\ncurrent-context: c\ncontexts: [{ name: c, context: { cluster: k, user: u } }]\nclusters: [{ name: k, cluster: { server: "https://198.19.0.10:6443" } }]\nusers: [{ name: u, user: {} }]\n', { mode: 0o600 });
    const now = new Date().toISOString();
    await writePivotJournal(dir, { version: 1, targetKubeconfig: kubeconfig, targetServer: 'https://198.19.0.10:6443', phase: 'done', startedAt: now, updatedAt: now, clusters: [{ namespace: 'demo', name: 'demo', wasPaused: false }], objects: [] });
    const layout = controlPlaneLayout(dir);
    await mkdir(layout.etcdDataDir, { recursive: true });
    await writeFile(layout.kubeconfig, 'left over\n', { mode: 0o600 });

    const result = await pivotToSelf({ dir, sink: nullSink, signal: new AbortController().signal });
    expect(result.action).toBe('nothing-to-move');
    expect(existsSync(layout.stateDir)).toBe(false);
    expect(existsSync(layout.kubeconfig)).toBe(false);
    expect(existsSync(kubeconfig)).toBe(true);
  });
});

import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { renderNewInstallConfig } from '../assets/index.js';
import { validateInstallConfigText } from '../config/index.js';
import { EnvironmentError } from '../errors.js';
import { recordExternalManagement } from '../installdir/management.js';
import { installConfigSchema } from '../platforms/index.js';
import { loadImagesLocked } from './load.js';

// What `create install-config --platform hosts` writes.
const config = validateInstallConfigText(
  renderNewInstallConfig({ name: 'demo', platform: 'hosts', kubernetesVersion: 'v1.36.3', controlPlaneReplicas: 1, workers: 0, platformAnswers: { listenAddress: '198.18.0.1' } }),
  { schema: installConfigSchema },
).config;

describe('loadImagesLocked for a cluster managed from elsewhere', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'load-images-'));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });
  const load = () => loadImagesLocked({ dir, config, archives: ['/nonexistent/app.tar'], sink: { emit: () => undefined }, signal: new AbortController().signal });

  it('says a self-managed cluster manages itself, and that no local control plane is there to serve the archives', async () => {
    await recordExternalManagement(dir, path.join(dir, 'auth', 'kubeconfig'));
    const error = await load().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(EnvironmentError);
    expect((error as Error).message).toBe(`The cluster of ${dir} manages itself: there is no local control plane to serve image archives to its nodes`);
  });

  it('names the management cluster of a cluster managed by another', async () => {
    await recordExternalManagement(dir, '/clusters/mgmt.kubeconfig');
    await expect(load()).rejects.toThrow(`The cluster of ${dir} is managed by the cluster of /clusters/mgmt.kubeconfig: there is no local control plane`);
  });
});

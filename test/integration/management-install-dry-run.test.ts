/**
 * `management install --dry-run` with the install directory of a hosts cluster, against a REAL
 * API server booted from the bundle (a local control plane running no controllers, standing in
 * for the cluster): it lists every object it would create, the providers' and the platform's
 * in-cluster artifacts' (the node-artifacts Deployment, Service and list, served from inside a
 * self-managed cluster), and their images, and creates nothing. The install itself, and a dry-run
 * against a real cluster, are e2e/hosts-pivot-self.test.ts's.
 * Fails (never skips) when the bundle has not been built: run `npm run bundle` first.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { validateInstallConfigText } from '../../src/config/index.js';
import type { LocalControlPlane } from '../../src/controlplane/local-controlplane.js';
import { RecordingSink } from '../support/recording-sink.js';
import type { KubeObject } from '../../src/kube/client.js';
import { prepareLocalControlPlane } from '../../src/management/attach.js';
import { describePlan, installManagement } from '../../src/management/install.js';
import { installConfigSchema } from '../../src/platforms/registry.js';
import { removeInstallDir, tempInstallDir } from './support/controlplane.js';

const config = validateInstallConfigText(
  `apiVersion: provisioner.dev/v1alpha1
kind: InstallConfig
metadata:
  name: dry
machinePools:
  - name: control-plane
    quantity: 1
    roles: [etcd, controlPlane]
  - name: worker
    quantity: 1
    roles: [worker]
platform:
  hosts: {}
bootstrap:
  listenAddress: 198.19.0.1
`,
  { schema: installConfigSchema },
).config;

describe('management install --dry-run with a hosts install directory', () => {
  let cluster: LocalControlPlane;
  let clusterDir: string;
  let dir: string;
  const abort = new AbortController();

  beforeAll(async () => {
    clusterDir = await tempInstallDir('dry-run-cluster');
    cluster = await prepareLocalControlPlane({ dir: clusterDir, detached: false, sink: new RecordingSink(), signal: abort.signal, controllers: [] });
    await cluster.start();
    dir = await tempInstallDir('dry-run');
  }, 600_000);

  afterAll(async () => {
    await cluster?.stop();
    abort.abort();
    for (const d of [dir, clusterDir]) await removeInstallDir(d);
  });

  it("lists the providers' objects and the node-artifacts Deployment, Service and list, with every image, and creates nothing", async () => {
    const result = await installManagement({ kubeconfig: cluster.kubeconfig, dir, config, dryRun: true, sink: new RecordingSink(), signal: abort.signal });
    expect(result.dryRun).toBe(true);
    expect(result.created).toEqual(expect.arrayContaining([
      'Deployment capi-system/capi-controller-manager',
      'Deployment provisioner-agent-system/provisioner-agent-controller-manager',
      'Deployment provisioner-agent-system/node-artifacts',
      'Service provisioner-agent-system/node-artifacts',
      'ConfigMap provisioner-agent-system/node-artifacts',
    ]));
    expect(result.images.map((i) => i.ref)).toEqual(expect.arrayContaining([expect.stringMatching(/\/provisioner-forwarder:/), expect.stringMatching(/\/capi-manager:/)]));
    const printed = describePlan(result).split('\n');
    expect(printed).toContain('create Deployment provisioner-agent-system/node-artifacts');
    expect(printed.filter((line) => line.startsWith('image ') && line.includes('/provisioner-forwarder:'))).toHaveLength(1);
    // Nothing written: the namespaces it would create are not there.
    for (const name of ['capi-system', 'provisioner-agent-system']) {
      expect(await cluster.kube.get<KubeObject>({ apiVersion: 'v1', kind: 'Namespace', metadata: { name } }), name).toBeUndefined();
    }
  }, 300_000);
});

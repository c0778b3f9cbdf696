/**
 * Issue 29's `networking.cni: none`, run as a new user would, on one namespace test host with
 * its own containerd: `create cluster` ends (exit 0, no timeout) once the node has registered,
 * saying it stays NotReady until a pod network runs and naming what to apply; the manifests
 * hold no pod network; the node is NotReady for that reason; the user then applies a CNI of
 * their own (here flannel's objects, written by hand from `flannelObjects` the way a user
 * applies a vendor's manifest) and the node becomes Ready; `destroy cluster` resets the host.
 */
import { mkdir, readdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { flannelObjects } from '../../src/addons/pod-network.js';
import { flannelImageRef } from '../../src/nodeartifacts/node-images.js';
import { waitFor } from '../integration/support/controlplane.js';
import { testClusterNetworking } from '../support/netns.js';
import { ensureBuilt } from './support/cli.js';
import { HostsLab, hostsInstallConfig, type BackgroundRun, type RunningAgent } from './support/hosts-lab.js';

const name = 'bring-your-own';
let lab: HostsLab;
let dir = '';
let destroyed = false;
const agents: RunningAgent[] = [];
let create: BackgroundRun | undefined;

interface NodeView { metadata: { name: string }; status: { conditions?: { type: string; status: string; reason?: string; message?: string }[] } }

beforeAll(async () => {
  await ensureBuilt();
  lab = await HostsLab.create(1, { runtime: true });
  await lab.writeKubeletCgroupRoots();
  dir = path.join(lab.net.root, 'cluster');
}, 300_000);

afterAll(async () => {
  create?.child.kill('SIGKILL');
  if (dir && !destroyed) await lab?.cli(['destroy', 'cluster', '--dir', dir], 600_000).catch(() => undefined);
  for (const agent of agents) agent.process.kill('SIGKILL');
  await lab?.remove();
}, 900_000);

describe('issue 29 acceptance: networking.cni none', () => {
  it('create cluster ends with the node registered and NotReady, naming what to apply; a CNI the user applies makes it Ready; destroy resets the host', async () => {
    const [h0] = lab.hosts;
    await mkdir(dir, { recursive: true });
    await writeFile(path.join(dir, 'install-config.yaml'), hostsInstallConfig(name, lab.net.machine.address, 0, 'none'));
    create = lab.spawnCli(['create', 'cluster', '--dir', dir]);
    agents.push(...(await lab.registerWithPrinted([[h0!, 'control-plane']], await lab.waitForHostCommands(create, 1))));
    const done = await create.child;
    const output = create.output();
    expect(done.exitCode, output).toBe(0);
    expect(output).toMatch(/stay NotReady until a pod network runs: networking\.cni is none/);
    expect(output).toContain('kubectl --kubeconfig auth/kubeconfig apply -f <your CNI manifest>');
    expect((await readdir(path.join(dir, 'cluster-api'))).filter((f) => f.includes('pod-network'))).toEqual([]);

    const kubeconfig = path.join(dir, 'auth', 'kubeconfig');
    const nodes = JSON.parse((await lab.kubectlWith(kubeconfig, ['get', 'nodes', '-o', 'json'])).stdout) as { items: NodeView[] };
    expect(nodes.items.map((n) => n.metadata.name)).toEqual([h0!.name]);
    const readyCondition = nodes.items[0]!.status.conditions?.find((c) => c.type === 'Ready');
    expect(readyCondition?.status).toBe('False');
    expect(readyCondition?.message ?? '').toMatch(/network plugin not ready|cni/i);

    // The user's own CNI: flannel's objects, as a manifest they apply.
    const manifest = { apiVersion: 'v1', kind: 'List', items: flannelObjects({ podCidr: testClusterNetworking.podCIDR, image: flannelImageRef, imagePullPolicy: 'Never' }) };
    const applied = await lab.kubectlWith(kubeconfig, ['apply', '-f', '-'], JSON.stringify(manifest));
    expect(applied.exitCode, applied.stderr).toBe(0);
    await waitFor('the node Ready with the CNI the user applied', async () => {
      const now = JSON.parse((await lab.kubectlWith(kubeconfig, ['get', 'nodes', '-o', 'json'])).stdout || '{"items":[]}') as { items: NodeView[] };
      return now.items[0]?.status.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') || undefined;
    }, 300_000);

    const destroy = await lab.cli(['destroy', 'cluster', '--dir', dir], 900_000);
    expect(destroy.exitCode, destroy.stderr).toBe(0);
    destroyed = true;
    expect(destroy.stderr).toMatch(/Hosts reset and released \(free for another cluster\): h\S+/);
    // The user's CNI left its rules and plugin on the host too: the reset takes them (they are named like the bundled one's).
    const rules = await lab.net.run(h0!.namespace, 'iptables-save', []);
    expect(rules.stdout.split('\n').filter((line) => /KUBE-|FLANNEL|CNI-/.test(line))).toEqual([]);
  }, 1_800_000);
});

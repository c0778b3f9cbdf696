/**
 * Real kubeadm nodes on namespace hosts, driven only by hand-written NodePlans through
 * `provisioner plan apply`: the shape of what the hosts platform generates (the settings
 * proven for these hosts: cgroup v1 with failCgroupV1 false, no systemd so the agent
 * supervises the kubelet, no CAP_SYS_RESOURCE so OOM score adjustments of 0, no registry
 * so images are imported from archives the control plane serves).
 *
 * Two hosts with a containerd each (test/support/netns.ts `runtime`) register with a
 * management cluster in the machine namespace. h0's plan downloads kubelet, kubeadm and the
 * control-plane image archives from the forwarder's artifact server (contentRef url +
 * sha256), imports the images, starts the supervised kubelet and runs `kubeadm init`; h1's
 * plan does the same with pause only and `kubeadm join`. Then: the API server answers on
 * 198.18.0.10:6443 from the machine namespace, 2 nodes are Ready with the bundled kubelet's
 * version, a pod of our pause image runs on the worker; reset plans leave no kubelet,
 * container or shim on either host.
 */
import { X509Certificate, createHash, randomBytes } from 'node:crypto';
import { readFile, readdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadBinaryCatalog } from '../../src/embedded/catalog.js';
import { kubeadmPauseTag } from '../../src/nodeartifacts/node-images.js';
import { prepareNodeArtifactsFor, type ServedNodeArtifact } from '../../src/nodeartifacts/prepare.js';
import { waitFor } from '../integration/support/controlplane.js';
import { testClusterNetworking, type TestHost } from '../support/netns.js';
import { ensureBuilt } from './support/cli.js';
import { step } from './support/steps.js';
import { HostsLab, type NodePlanView, type RunningAgent } from './support/hosts-lab.js';

let lab: HostsLab;
const agents: RunningAgent[] = [];
let artifacts: ServedNodeArtifact[];
let kubeletVersion: string;
let workloadKubeconfig: string;
const socket = 'unix:///run/containerd/containerd.sock';
const token = `${randomBytes(3).toString('hex')}.${randomBytes(8).toString('hex')}`;
const timings: Record<string, number> = {};

beforeAll(async () => {
  await ensureBuilt();
  lab = await HostsLab.create(2, { runtime: true });
  const start = await lab.startManagement();
  expect(start.exitCode, start.stderr).toBe(0);
  for (const host of lab.hosts) {
    const registered = await lab.register(host, await lab.registrationCommand());
    expect(registered.exitCode, registered.stderr).toBe(0);
    agents.push(lab.startAgent(host));
  }
  const started = Date.now();
  artifacts = await prepareNodeArtifactsFor({ dir: lab.mgmt });
  timings['node artifacts prepared (images built or cached)'] = Date.now() - started;
  kubeletVersion = (await loadBinaryCatalog()).binary('kubelet').version;
  workloadKubeconfig = path.join(lab.net.root, 'workload.kubeconfig');
}, 900_000);

afterAll(async () => {
  process.stderr.write(`hosts-kubeadm timings (ms): ${JSON.stringify(timings)}\n`);
  for (const agent of agents) agent.process.kill('SIGKILL');
  await lab?.remove();
}, 300_000);

async function phase(host: TestHost, name: string, want: string, timeoutMs: number): Promise<NodePlanView> {
  let last: NodePlanView | undefined;
  try {
    return await waitFor(`plan ${name} of ${host.name} ${want}`, async () => {
      last = await lab.plan(host, name);
      if (last?.status?.phase === 'Failed' && want !== 'Failed') throw new Error(`plan ${name} failed: ${JSON.stringify(last.status)}`);
      return last?.status?.phase === want ? last : undefined;
    }, timeoutMs);
  } catch (error) {
    const agent = agents.find((a) => a.host === host);
    throw new Error(`${String(error)}; last seen: ${JSON.stringify(last?.status)}; agent: ${agent?.output().slice(-2000)}`, { cause: error });
  }
}

const digest = (a: ServedNodeArtifact) => (a.sha256.startsWith('sha256:') ? a.sha256 : `sha256:${a.sha256}`);

function served(rel: string): ServedNodeArtifact {
  const found = artifacts.find((a) => a.path === rel);
  if (!found?.url) throw new Error(`no served node artifact ${rel} (have ${artifacts.map((a) => a.path).join(', ')})`);
  return found;
}

/** Plan files: the two binaries and the named image archives, downloaded from the artifact server. */
function downloads(images: readonly string[]) {
  const bin = (name: string) => ({ path: `/usr/local/bin/${name}`, contentRef: { url: served(`node/bin/${name}`).url, digest: digest(served(`node/bin/${name}`)) }, mode: '0755' });
  const image = (name: string) => ({ path: `/var/lib/provisioner/images/${name}.tar`, contentRef: { url: served(`node/images/${name}.tar`).url, digest: digest(served(`node/images/${name}.tar`)) }, mode: '0644' });
  return [bin('kubelet'), bin('kubeadm'), ...images.map(image)];
}

/** A node-local bridge network for the host's pods, 198.19.<i>.0/24 (a /24 of the test pod block). */
function cniConfig(index: number) {
  return {
    path: '/etc/cni/net.d/10-provisioner.conflist',
    content: `${JSON.stringify({
      cniVersion: '1.0.0', name: 'provisioner', plugins: [
        { type: 'bridge', bridge: 'cni0', isGateway: true, ipMasq: true, hairpinMode: true, ipam: { type: 'host-local', ranges: [[{ subnet: `198.19.${index}.0/24` }]], routes: [{ dst: '0.0.0.0/0' }] } },
        { type: 'portmap', capabilities: { portMappings: true } },
      ],
    }, null, 2)}\n`,
  };
}

/** kubeletExtraArgs every node needs here (see docs/architecture.md, hosts platform). */
function kubeletArgs(host: TestHost): string {
  const args = { 'fail-cgroupv1': 'false', 'cgroup-driver': 'cgroupfs', 'oom-score-adj': '0', 'node-ip': host.address, 'cgroup-root': host.cgroup };
  return Object.entries(args).map(([name, value]) => `  - name: ${name}\n    value: "${value}"`).join('\n');
}

function nodeRegistration(host: TestHost): string {
  return `nodeRegistration:
  name: ${host.name}
  criSocket: ${socket}
  imagePullPolicy: Never
  ignorePreflightErrors:
  - SystemVerification
  kubeletExtraArgs:
${kubeletArgs(host)}`;
}

/** The kubelet, run by the agent's supervisor once kubeadm has written its configuration (systemd's drop-in, as a loop). */
const kubeletScript = [
  'until [ -f /var/lib/kubelet/config.yaml ] && [ -f /var/lib/kubelet/kubeadm-flags.env ]; do sleep 1; done',
  '. /var/lib/kubelet/kubeadm-flags.env',
  'exec /usr/local/bin/kubelet --bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf --kubeconfig=/etc/kubernetes/kubelet.conf --config=/var/lib/kubelet/config.yaml $KUBELET_KUBEADM_ARGS',
].join('\n');

const instructions = {
  importImages: { name: 'import-images', command: '/bin/sh', args: ['-c', 'for f in /var/lib/provisioner/images/*.tar; do ctr -n k8s.io images import "$f" >/dev/null || exit 1; done; ctr -n k8s.io images ls -q | grep "^provisioner.local/"'], saveOutput: true },
  startKubelet: { name: 'kubelet', command: '/bin/sh', args: ['-c', 'exec "$PROVISIONER_AGENT" "$@"', 'sh', 'supervise', 'start', '--name', 'kubelet', '--', '/bin/sh', '-c', kubeletScript], saveOutput: true },
};

const resetPlan = {
  instructions: [
    { name: 'stop-kubelet', command: '/bin/sh', args: ['-c', 'exec "$PROVISIONER_AGENT" supervise stop --name kubelet'], saveOutput: true },
    { name: 'kubeadm-reset', command: '/usr/local/bin/kubeadm', args: ['reset', '-f', '--cri-socket', socket], saveOutput: true, timeout: '3m' },
    { name: 'remove-state', command: '/bin/sh', args: ['-c', 'rm -rf /etc/cni/net.d/10-provisioner.conflist /var/lib/etcd/* /var/lib/provisioner/images /run/kubeadm/*'] },
  ],
  executionTimeout: '5m',
};

/** Commands of the processes in a host's cgroup (below it too: the pods'). */
async function processesOf(host: TestHost): Promise<string[]> {
  const base = path.join('/sys/fs/cgroup/pids', host.cgroup);
  const pids = new Set<string>();
  const walk = async (dir: string) => {
    for (const pid of (await readFile(path.join(dir, 'cgroup.procs'), 'utf8')).split('\n').filter(Boolean)) pids.add(pid);
    for (const entry of await readdir(dir, { withFileTypes: true })) if (entry.isDirectory()) await walk(path.join(dir, entry.name));
  };
  await walk(base);
  const names: string[] = [];
  for (const pid of pids) names.push((await readFile(`/proc/${pid}/comm`, 'utf8').catch(() => '')).trim());
  return names.filter(Boolean);
}

interface NodeList { items: { metadata: { name: string }; status: { nodeInfo: { kubeletVersion: string }; conditions: { type: string; status: string }[] } }[] }

describe('kubeadm nodes on namespace hosts, from hand-written NodePlans', () => {
  // Each test runs the steps it stands on (step(): at most once per file), so each also passes alone.
  const init = step(async () => {
    const h0 = lab.hosts[0]!;
    const config = `apiVersion: kubeadm.k8s.io/v1beta4
kind: InitConfiguration
bootstrapTokens:
- token: ${token}
  ttl: 1h0m0s
localAPIEndpoint:
  advertiseAddress: ${h0.address}
  bindPort: 6443
${nodeRegistration(h0)}
skipPhases:
- addon/coredns
- addon/kube-proxy
---
apiVersion: kubeadm.k8s.io/v1beta4
kind: ClusterConfiguration
kubernetesVersion: ${kubeletVersion}
clusterName: hosts-kubeadm
imageRepository: provisioner.local
controlPlaneEndpoint: ${h0.address}:6443
etcd:
  local:
    imageTag: ${served('node/images/etcd.tar').ref!.split(':').pop()}
networking:
  podSubnet: ${testClusterNetworking.podCIDR}
  serviceSubnet: ${testClusterNetworking.serviceCIDR}
`;
    const started = Date.now();
    const apply = await lab.applyPlan(h0, 'node', {
      files: [...downloads(['kubernetes', 'etcd', 'pause']), cniConfig(0), { path: '/run/kubeadm/kubeadm.yaml', content: config, mode: '0600' }],
      instructions: [
        instructions.importImages,
        instructions.startKubelet,
        { name: 'kubeadm-init', command: '/usr/local/bin/kubeadm', args: ['init', '--config', '/run/kubeadm/kubeadm.yaml'], saveOutput: true, timeout: '6m' },
      ],
      executionTimeout: '10m',
    });
    expect(apply.exitCode, apply.stderr).toBe(0);
    const done = await phase(h0, 'node', 'Applied', 720_000);
    timings['h0 plan (download, import, kubeadm init)'] = Date.now() - started;
    const outputs = Object.fromEntries((done.status?.instructions ?? []).map((i) => [i.name, i.output ?? '']));
    expect(outputs['import-images']).toContain(`provisioner.local/kube-apiserver:${kubeletVersion}`);
    expect(outputs['kubelet']).toMatch(/kubelet: supervised \(pid \d+/);
    expect(outputs['kubeadm-init']).toContain('Your Kubernetes control-plane has initialized successfully');

    // The admin kubeconfig kubeadm wrote on h0 names https://198.18.0.10:6443; kubectl runs in the machine namespace.
    await writeFile(workloadKubeconfig, await readFile(path.join(h0.rootDir, 'etc/kubernetes/admin.conf')), { mode: 0o600 });
    expect(await readFile(workloadKubeconfig, 'utf8')).toContain(`server: https://${h0.address}:6443`);
    const version = await lab.kubectlWith(workloadKubeconfig, ['version', '-o', 'json']);
    expect(version.exitCode, version.stderr).toBe(0);
    expect((JSON.parse(version.stdout) as { serverVersion: { gitVersion: string } }).serverVersion.gitVersion).toBe(kubeletVersion);
  });

  const join = step(async () => {
    await init();
    const [h0, h1] = [lab.hosts[0]!, lab.hosts[1]!];
    const ca = new X509Certificate(await readFile(path.join(h0.rootDir, 'etc/kubernetes/pki/ca.crt')));
    const caHash = `sha256:${createHash('sha256').update(ca.publicKey.export({ type: 'spki', format: 'der' })).digest('hex')}`;
    const config = `apiVersion: kubeadm.k8s.io/v1beta4
kind: JoinConfiguration
discovery:
  bootstrapToken:
    apiServerEndpoint: ${h0.address}:6443
    token: ${token}
    caCertHashes:
    - ${caHash}
${nodeRegistration(h1)}
`;
    const started = Date.now();
    const apply = await lab.applyPlan(h1, 'node', {
      files: [...downloads(['pause']), cniConfig(1), { path: '/run/kubeadm/kubeadm.yaml', content: config, mode: '0600' }],
      instructions: [
        instructions.importImages,
        instructions.startKubelet,
        { name: 'kubeadm-join', command: '/usr/local/bin/kubeadm', args: ['join', '--config', '/run/kubeadm/kubeadm.yaml'], saveOutput: true, timeout: '5m' },
      ],
      executionTimeout: '10m',
    });
    expect(apply.exitCode, apply.stderr).toBe(0);
    await phase(h1, 'node', 'Applied', 600_000);
    timings['h1 plan (download, import, kubeadm join)'] = Date.now() - started;

    let nodes: NodeList | undefined;
    await waitFor('two Ready nodes', async () => {
      const run = await lab.kubectlWith(workloadKubeconfig, ['get', 'nodes', '-o', 'json']);
      if (run.exitCode !== 0) return undefined;
      nodes = JSON.parse(run.stdout) as NodeList;
      return nodes.items.length === 2 && nodes.items.every((n) => n.status.conditions.some((c) => c.type === 'Ready' && c.status === 'True'));
    }, 180_000).catch((error: unknown) => {
      throw new Error(`${String(error)}: ${JSON.stringify(nodes?.items.map((n) => [n.metadata.name, n.status.conditions]))}`, { cause: error });
    });
    timings['h1 Ready after plan start'] = Date.now() - started;
    expect(nodes!.items.map((n) => n.metadata.name).sort()).toEqual([h0.name, h1.name].sort());
    expect(nodes!.items.map((n) => n.status.nodeInfo.kubeletVersion)).toEqual([kubeletVersion, kubeletVersion]);
  });

  it('h0: kubelet and kubeadm downloaded, images imported, the supervised kubelet, kubeadm init: the API server answers on 198.18.0.10:6443', init, 900_000);

  it('h1 joins as a worker: two nodes Ready with the bundled kubelet version', join, 1_800_000);

  it('a pod of our pause image runs on the worker', async () => {
    await join();
    const h1 = lab.hosts[1]!;
    const pod = {
      apiVersion: 'v1', kind: 'Pod', metadata: { name: 'pause', namespace: 'default' },
      spec: { nodeSelector: { 'kubernetes.io/hostname': h1.name }, containers: [{ name: 'pause', image: `provisioner.local/pause:${kubeadmPauseTag}`, imagePullPolicy: 'Never' }] },
    };
    const created = await lab.kubectlWith(workloadKubeconfig, ['apply', '-f', '-'], JSON.stringify(pod));
    expect(created.exitCode, created.stderr).toBe(0);
    const running = await waitFor('the pause pod Running', async () => {
      const run = await lab.kubectlWith(workloadKubeconfig, ['get', 'pod', 'pause', '-n', 'default', '-o', 'json']);
      const view = run.exitCode === 0 ? (JSON.parse(run.stdout) as { spec: { nodeName?: string }; status: { phase?: string; podIP?: string } }) : undefined;
      return view?.status.phase === 'Running' ? view : undefined;
    }, 180_000);
    expect(running.spec.nodeName).toBe(h1.name);
    expect(running.status.podIP).toMatch(/^198\.19\.1\.\d+$/);
    // Its processes are in h1's cgroup: the pod cgroups are below the kubelet's cgroupRoot.
    expect(await processesOf(h1)).toEqual(expect.arrayContaining(['kubelet', 'containerd', 'pause']));
  }, 1_800_000);

  it('reset plans leave no kubelet, container or shim on either host', async () => {
    await join();
    for (const host of [...lab.hosts].reverse()) {
      const started = Date.now();
      expect((await lab.applyPlan(host, 'reset', resetPlan)).exitCode).toBe(0);
      const done = await phase(host, 'reset', 'Applied', 420_000);
      timings[`${host.name} reset plan`] = Date.now() - started;
      expect(done.status?.instructions?.find((i) => i.name === 'stop-kubelet')?.output).toContain('kubelet: stopped');
      const left = await processesOf(host);
      expect(left.filter((name) => /kubelet|shim|pause|etcd|kube-|supervise/.test(name)), `${host.name} runs ${left.join(', ')}`).toEqual([]);
      const containers = await lab.net.run(host.namespace, 'ctr', ['-n', 'k8s.io', 'containers', 'ls', '-q']);
      expect(containers.exitCode, containers.stderr).toBe(0);
      expect(containers.stdout.trim()).toBe('');
      const status = await lab.net.run(host.namespace, lab.agentPath, ['supervise', 'status', '--name', 'kubelet']);
      expect(status.exitCode).toBe(1);
    }
  }, 1_800_000);
});

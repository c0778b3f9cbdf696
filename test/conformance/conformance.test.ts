/**
 * The conformance tier (issue 29 item 5): Kubernetes' own e2e suite against a hosts-platform
 * cluster made as a user makes one. Three namespace test hosts with their own containerd
 * (test/support/netns.ts); an install config written by hand for 1 control-plane and 2 worker
 * hosts; `create cluster` in the background prints a registration command per host; the hosts
 * register with them and run their agents; `create cluster` exits 0 with 3 Ready nodes. Then
 * `images load` puts the e2e images we build (agnhost and busybox, src/nodeartifacts/e2e-images.ts)
 * on every node, and the bundle's e2e.test (the suite at the bundled Kubernetes v1.36.3, built with
 * `go test -c`) runs `chosenTests` below, each of which must pass; finally `npm run conformance`
 * (scripts/conformance/run.ts) runs one test through the path users take.
 *
 * e2e.test runs inside the control-plane host's namespace, whose /etc/resolv.conf names the test
 * network's 198.18.0.1: nothing of the suite can ask this machine's own resolver, and every packet
 * goes to the test range (hosts 198.18.0.0/16, pods and Services from 198.19.0.0/16).
 * One cluster only: the machine has 2 cores.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBinaries, ensureLayer, resolveCacheDir } from '../../src/embedded/cache.js';
import { loadBinaryCatalog, packageRoot } from '../../src/embedded/catalog.js';
import { ensureE2eImages, type E2eImageArchive } from '../../src/nodeartifacts/e2e-images.js';
import { focusOf, runSuite, summarize } from '../../scripts/conformance/e2e-suite.js';
import { ensureBuilt } from '../e2e/support/cli.js';
import { HostsLab, hostsInstallConfig, type BackgroundRun, type RunningAgent } from '../e2e/support/hosts-lab.js';

/**
 * The [Conformance] tests this tier runs, by their full names, and why each: Services, the pod
 * network across nodes and a Deployment rollout, using only images we build (agnhost, busybox,
 * pause). Left out on purpose: the DNS tests (every one runs a `jessie` prober of the
 * glibc-dns-testing image, which we do not build), RecreateDeployment and rollover (agnhost 2.55,
 * "AgnhostPrev"), anything over UDP (busybox's nc has none), and anything reaching the internet.
 */
export const chosenTests: readonly { name: string; why: string }[] = [
  { name: '[sig-network] API Server should provide secure master service [Conformance]', why: 'the kubernetes Service in default names the API server on 443' },
  { name: '[sig-network] Services should find a service from listing all namespaces [Conformance]', why: 'Services are listed across namespaces' },
  { name: '[sig-network] Services should serve a basic endpoint from pods [Conformance]', why: 'a ClusterIP Service reaches agnhost pods, by name (CoreDNS) and by ClusterIP (kube-proxy), from another pod; endpoints follow pods' },
  { name: '[sig-network] Services should serve multiport endpoints from pods [Conformance]', why: 'a Service with two ports reaches the right pod on each' },
  { name: '[sig-network] Services should be able to create a functioning NodePort service [Conformance]', why: 'a NodePort answers on every node\'s address (kube-proxy\'s NodePort rules)' },
  { name: '[sig-network] Services should be able to change the type from ExternalName to ClusterIP [Conformance]', why: 'a Service changed to ClusterIP gets endpoints and answers by name and ClusterIP' },
  { name: '[sig-network] Endpoints should test the lifecycle of an Endpoint [Conformance]', why: 'the Endpoints API: create, watch, patch, delete' },
  { name: '[sig-network] Networking Granular Checks: Pods should function for intra-pod communication: http [NodeConformance] [Conformance]', why: 'HTTP from every pod to every pod, across the three nodes (flannel\'s host-gw routes)' },
  { name: '[sig-network] Networking Granular Checks: Pods should function for node-pod communication: http [LinuxOnly] [NodeConformance] [Conformance]', why: 'HTTP from a host-network pod (the node itself) to pods on every node' },
  { name: '[sig-apps] Deployment RollingUpdateDeployment should delete old pods and create new ones [Conformance]', why: 'a Deployment rolls a ReplicaSet\'s pods over to a new template' },
  { name: '[sig-apps] ReplicaSet should serve a basic image on each replica with a public image [Conformance]', why: 'each replica of a ReplicaSet answers through the API server\'s pod proxy' },
];

const name = 'conformance';
let lab: HostsLab;
let dir = '';
let destroyed = false;
const agents: RunningAgent[] = [];
let create: BackgroundRun | undefined;
let images: E2eImageArchive[] = [];
/** Milliseconds per stage, printed at the end. */
const timings: Record<string, number> = {};

interface NodeView { metadata: { name: string }; status: { conditions?: { type: string; status: string }[] } }
const ready = (node: NodeView) => node.status.conditions?.find((c) => c.type === 'Ready')?.status === 'True';
const workloadKubeconfig = () => path.join(dir, 'auth', 'kubeconfig');

beforeAll(async () => {
  await ensureBuilt();
  lab = await HostsLab.create(3, { runtime: true });
  await lab.writeKubeletCgroupRoots();
  dir = path.join(lab.net.root, 'cluster');
}, 300_000);

afterAll(async () => {
  process.stderr.write(`conformance tier timings (ms): ${JSON.stringify(timings)}\n`);
  create?.child.kill('SIGKILL');
  // Destroy while the agents still run: they run the reset plans it waits for.
  if (dir && !destroyed) await lab?.cli(['destroy', 'cluster', '--dir', dir], 600_000).catch(() => undefined);
  for (const agent of agents) agent.process.kill('SIGKILL');
  await lab?.remove();
}, 900_000);

describe('conformance: Kubernetes e2e [Conformance] tests on a 1 + 2 hosts cluster', () => {
  it('create cluster: a control-plane and two worker hosts registered with the printed commands, 3 Ready nodes', async () => {
    await mkdir(dir, { recursive: true });
    await writeFile(path.join(dir, 'install-config.yaml'), hostsInstallConfig(name, lab.net.machine.address, 2));
    const started = Date.now();
    create = lab.spawnCli(['create', 'cluster', '--dir', dir]);
    const commands = await lab.waitForHostCommands(create, 3);
    timings['registration commands printed'] = Date.now() - started;
    expect(commands.map((c) => c.role).sort()).toEqual(['control-plane', 'worker', 'worker']);
    agents.push(...(await lab.registerWithPrinted(lab.hosts.map((host, i) => [host, i === 0 ? 'control-plane' : 'worker'] as const), commands)));
    const done = await create.child;
    timings['create cluster exited'] = Date.now() - started;
    expect(done.exitCode, `${create.output()}\n${agents.map((a) => a.output().slice(-3000)).join('\n')}`).toBe(0);
    const nodes = await lab.kubectlWith(workloadKubeconfig(), ['get', 'nodes', '-o', 'json']);
    expect(nodes.exitCode, nodes.stderr).toBe(0);
    const items = (JSON.parse(nodes.stdout) as { items: NodeView[] }).items;
    expect(items.map((n) => n.metadata.name).sort()).toEqual(lab.hosts.map((h) => h.name).sort());
    for (const node of items) expect(ready(node), node.metadata.name).toBe(true);
  }, 1_800_000);

  it('images load puts agnhost and busybox, under the refs e2e.test names, on every node', async () => {
    const catalog = await loadBinaryCatalog();
    const cacheDir = resolveCacheDir({});
    const [agnhostPath] = Object.values(await ensureBinaries(['agnhost'], { catalog }));
    const userland = await ensureLayer(catalog, 'userland', { catalog });
    images = await ensureE2eImages(
      { path: agnhostPath!, version: catalog.binary('agnhost').version },
      { path: userland.path, sha256: userland.layer.sha256, description: 'userland' },
      { cacheDir, architecture: 'amd64' },
    );
    const started = Date.now();
    const load = await lab.cli(['images', 'load', '--dir', dir, ...images.map((i) => i.file)], 600_000);
    timings['images load (3 hosts)'] = Date.now() - started;
    expect(load.exitCode, `${load.stdout}\n${load.stderr}`).toBe(0);
    for (const image of images) expect(load.stdout).toContain(image.ref);
    for (const host of lab.hosts) {
      const listed = await lab.net.run(host.namespace, 'ctr', ['--address', '/run/containerd/containerd.sock', '-n', 'k8s.io', 'images', 'ls', '-q']);
      for (const ref of ['provisioner.local/agnhost:2.63.0', 'provisioner.local/busybox:1.37.0-1', 'provisioner.local/pause:3.10.2']) {
        expect(listed.stdout.split('\n'), `${host.name}'s images`).toContain(ref);
      }
    }
  }, 900_000);

  it(`e2e.test passes the ${chosenTests.length} chosen [Conformance] tests`, async () => {
    const binaries = await ensureBinaries(['e2e.test', 'kubectl']);
    const [h0] = lab.hosts;
    // Kept after the run (the lab's directory is not): e2e.test's output, JSON report and JUnit.
    const workDir = path.join(packageRoot, 'test-results', 'conformance');
    const run = await runSuite({
      e2eTest: binaries['e2e.test']!,
      kubectl: binaries.kubectl!,
      kubeconfig: workloadKubeconfig(),
      focus: focusOf(chosenTests.map((t) => t.name)),
      workDir,
      timeout: '50m',
      run: (command, args, env) => lab.net.run(h0!.namespace, command, args, { env, timeout: 3_300_000, cwd: workDir }),
    });
    timings['e2e.test'] = run.seconds * 1000;
    const ran = run.specs.filter((s) => s.state !== 'skipped');
    process.stderr.write(`${summarize(run.specs, run.seconds)}\n(e2e.test's output: ${run.logFile})\n`);
    const states = Object.fromEntries(ran.map((s) => [s.name, s.state]));
    const failures = ran.filter((s) => s.state !== 'passed').map((s) => `${s.name}: ${s.failure ?? s.state}`).join('\n\n');
    expect(states, failures).toEqual(Object.fromEntries(chosenTests.map((t) => [t.name, 'passed'])));
    expect(run.exitCode, failures).toBe(0);
  }, 3_600_000);

  it('npm run conformance runs a focused [Conformance] test against the install and prints passed / failed / not runnable', async () => {
    const started = Date.now();
    // In the machine's namespace, where the CLI reaches the local control plane; the default test asks the API server only.
    // PROVISIONER_CONFORMANCE_FOCUS runs others by hand (any test that resolves names from e2e.test's own process would ask this machine's resolver).
    const focus = process.env.PROVISIONER_CONFORMANCE_FOCUS ?? 'API Server should provide secure master service';
    const run = await lab.net.run(lab.net.machine.namespace, process.execPath, [
      path.join(packageRoot, 'node_modules/tsx/dist/cli.mjs'), path.join(packageRoot, 'scripts/conformance/run.ts'),
      '--dir', dir, '--focus', focus,
    ], { cwd: packageRoot, timeout: 3_500_000, all: true });
    timings['npm run conformance'] = Date.now() - started;
    process.stderr.write(`${run.stdout}\n`);
    expect(run.exitCode, `${run.stdout}\n${run.stderr}`).toBe(0);
    if (process.env.PROVISIONER_CONFORMANCE_FOCUS === undefined) expect(run.stdout).toMatch(/^conformance: 1 passed, 0 failed, 0 not runnable/m);
  }, 3_600_000);

  it('destroy cluster exits 0', async () => {
    const started = Date.now();
    const run = await lab.cli(['destroy', 'cluster', '--dir', dir], 900_000);
    timings['destroy cluster'] = Date.now() - started;
    expect(run.exitCode, `${run.stdout}\n${run.stderr}`).toBe(0);
    destroyed = true;
  }, 900_000);
});

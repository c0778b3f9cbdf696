/**
 * The real bundle: extracts every binary into a fresh cache and asks each one for its
 * version, which must match the manifest. Fails (never skips) when the bundle has not
 * been built: run `npm run bundle` first.
 */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ensureBinaries } from '../../src/embedded/cache.js';
import { sha256OfFile } from '../../src/files.js';
import { loadCatalog, packageRoot, type BundleCatalog } from '../../src/embedded/catalog.js';
import type { BundledBinary } from '../../src/embedded/manifest.js';
import { messageOf } from '../../src/errors.js';

interface VersionProbe {
  /** What the binary is, for the test name. */
  what: string;
  matches(binary: BundledBinary): boolean;
  args(scratch: string): string[];
  /** First capture group: the version the binary printed. */
  pattern: RegExp;
  /** Managers print their version and then fail on the missing kubeconfig. */
  exitsNonZero?: boolean;
  /** Read the module version from the Go build information inside the binary instead of running it. */
  fromBuildInfo?: boolean;
  /** Run it through this link of a multi-call binary (so called by that name). Default: the binary itself. */
  runAs?: string;
}

const isKube = (b: BundledBinary): boolean => b.name === 'kube' && b.package === './cmd/kube';

/**
 * The Cluster API managers (controller-runtime) have no `--version` flag: their main()
 * logs `"Version: vX (git commit: …)"` right after flag parsing and then exits because
 * the kubeconfig it was given does not exist.
 */
const managerProbe = (what: string, pkg: string): VersionProbe => ({
  what,
  matches: (b) => b.package === pkg,
  args: (scratch) => ['--v=0', `--kubeconfig=${path.join(scratch, 'absent-kubeconfig')}`],
  pattern: /"Version: (v\S+) \(git commit: [^)]*\)"/,
  exitsNonZero: true,
});

const probes: VersionProbe[] = [
  // The Kubernetes components: one multi-call executable (embedded/modules/kubernetes/cmd/kube), each run through
  // its link, so by the name it is called by, as the local control plane and the hosts run them.
  ...['kube-apiserver', 'kubelet', 'kube-controller-manager', 'kube-scheduler', 'kube-proxy'].map(
    (name): VersionProbe => ({ what: name, matches: isKube, runAs: name, args: () => ['--version'], pattern: /^Kubernetes (v\S+)$/m }),
  ),
  { what: 'kubeadm', matches: isKube, runAs: 'kubeadm', args: () => ['version', '-o', 'short'], pattern: /^(v\S+)$/m },
  // ... or named by the first argument.
  { what: 'kube kubeadm (component as the first argument)', matches: isKube, args: () => ['kubeadm', 'version', '-o', 'short'], pattern: /^(v\S+)$/m },
  { what: 'etcd', matches: (b) => b.module === 'go.etcd.io/etcd/server/v3', args: () => ['--version'], pattern: /^etcd Version: (\S+)$/m },
  { what: 'kubectl', matches: (b) => b.package === 'k8s.io/kubernetes/cmd/kubectl', args: () => ['version', '--client'], pattern: /^Client Version: (v\S+)$/m },
  { what: 'clusterctl', matches: (b) => b.package === 'sigs.k8s.io/cluster-api/cmd/clusterctl', args: () => ['version', '-o', 'short'], pattern: /^(v\S+)$/m },
  // Ours over Cluster API's packages (embedded/modules/capi/main.go): the core, kubeadm and dev providers in one process.
  { what: 'Cluster API manager', matches: (b) => b.name === 'capi-manager' && b.package === '.', args: () => ['--version'], pattern: /^(v\S+)$/m },
  managerProbe('vSphere infrastructure manager', 'sigs.k8s.io/cluster-api-provider-vsphere'),
  // CAPA's manager logs its version before it has a logger (controller-runtime drops it) and
  // has no version flag; Go's build information inside the binary names the module version it
  // was built from (-trimpath leaves the linker flags out of it).
  {
    what: 'AWS infrastructure manager',
    matches: (b) => b.package === 'sigs.k8s.io/cluster-api-provider-aws/v2',
    args: () => [],
    pattern: /^(?:mod|dep)\tsigs\.k8s\.io\/cluster-api-provider-aws\/v2\t(v\S+)\t/m,
    fromBuildInfo: true,
  },
  { what: 'vCenter simulator', matches: (b) => b.name === 'vcsim', args: () => ['-version'], pattern: /^(v\S+)$/m },
  { what: 'distribution registry', matches: (b) => b.name === 'registry', args: () => ['--version'], pattern: /^\S+ github\.com\/distribution\/distribution\/v3 (v\S+)$/m },
  { what: 'govc', matches: (b) => b.name === 'govc', args: () => ['version'], pattern: /^govc (\S+)$/m },
  // The hosts platform's add-ons and the test images' binaries: Go's build information names the module each was built from.
  ...([
    ['CoreDNS', 'github.com/coredns/coredns', (b: BundledBinary) => b.name === 'coredns'],
    ['flanneld', 'github.com/flannel-io/flannel', (b: BundledBinary) => b.name === 'flanneld'],
    ['flannel CNI plugin', 'github.com/containernetworking/plugins', (b: BundledBinary) => b.name === 'flannel'],
    ['agnhost', 'k8s.io/kubernetes', (b: BundledBinary) => b.package === 'k8s.io/kubernetes/test/images/agnhost'],
    ['e2e.test', 'k8s.io/kubernetes', (b: BundledBinary) => b.name === 'e2e.test'],
  ] as const).map(([what, module, matches]): VersionProbe => ({
    what,
    matches,
    args: () => [],
    // A main module's line ends after its version; a dependency's goes on with its hash.
    pattern: new RegExp(`^(?:mod|dep)\\t${module.replaceAll('.', '\\.').replaceAll('/', '\\/')}\\t(v\\S+)(?:\\t|$)`, 'm'),
    fromBuildInfo: true,
  })),
  // Ours (provider/): each prints package.json's version, which the bundle stamps.
  { what: 'node agent', matches: (b) => b.module === 'provisioner.dev/provider' && b.package === './cmd/agent', args: () => ['version'], pattern: /^(v\S+)$/m },
  { what: 'API server forwarder', matches: (b) => b.module === 'provisioner.dev/provider' && b.package === './cmd/forwarder', args: () => ['--version'], pattern: /^(v\S+)$/m },
  { what: 'pod sandbox (pause)', matches: (b) => b.module === 'provisioner.dev/provider' && b.package === './cmd/pause', args: () => ['--version'], pattern: /^(v\S+)$/m },
];

const withoutV = (version: string) => version.replace(/^v/, '');

interface Ran {
  code: number | null;
  output: string;
}

/** Runs a binary with a minimal environment (no KUBECONFIG, HOME in scratch) and a deadline. */
function runBinary(file: string, args: string[], scratch: string): Promise<Ran> {
  return new Promise((resolve, reject) => {
    const child = spawn(file, args, { env: { PATH: '/usr/bin:/bin', HOME: scratch }, stdio: ['ignore', 'pipe', 'pipe'], timeout: 60_000 });
    let output = '';
    child.stdout.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr.on('data', (d: Buffer) => (output += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, output }));
  });
}

describe('the binary bundle', () => {
  let catalog: BundleCatalog;
  let scratch = '';
  let paths: Record<string, string>;
  /** Set when the bundle is missing: every test then fails with it, none is skipped. */
  let setupError: Error | undefined;

  beforeAll(async () => {
    try {
      catalog = await loadCatalog();
    } catch (error) {
      setupError = new Error(`No usable bundle (${messageOf(error)}). Run \`npm run bundle\` in ${packageRoot} before the integration tests.`);
      return;
    }
    scratch = await mkdtemp(path.join(os.tmpdir(), 'provisioner-bundle-it-'));
    paths = await ensureBinaries(
      catalog.binaries.flatMap((b) => [b.name, ...(b.links ?? [])]),
      { catalog, cacheDir: path.join(scratch, 'cache') },
    );
  });

  beforeEach(() => {
    if (setupError) throw setupError;
  });

  afterAll(async () => {
    if (scratch) await rm(scratch, { recursive: true, force: true });
  });

  it('extracts every binary as an executable whose sha256 and size match the manifest, and each link as that binary under its name', async () => {
    expect(Object.keys(paths).sort()).toEqual(catalog.binaries.flatMap((b) => [b.name, ...(b.links ?? [])]).sort());
    for (const b of catalog.binaries) {
      const file = paths[b.name]!;
      expect(file.startsWith(path.join(scratch, 'cache', 'bin', b.sha256))).toBe(true);
      const st = await stat(file);
      expect({ name: b.name, size: st.size, mode: st.mode & 0o777 }).toEqual({ name: b.name, size: b.size, mode: 0o755 });
      expect(await sha256OfFile(file)).toBe(b.sha256);
      for (const link of b.links ?? []) {
        expect(paths[link]).toBe(path.join(scratch, 'cache', 'bin', b.sha256, link));
        expect((await stat(paths[link]!)).ino).toBe(st.ino);
      }
    }
    // The six Kubernetes components ship once.
    expect(catalog.binaries.find(isKube)?.links?.sort()).toEqual(['kube-apiserver', 'kube-controller-manager', 'kube-proxy', 'kube-scheduler', 'kubeadm', 'kubelet']);
  });

  it('holds every provider component file with the manifest sha256', async () => {
    expect(catalog.components.length).toBeGreaterThan(0);
    for (const c of catalog.components) {
      const content = await readFile(catalog.componentsPath(c));
      expect({ provider: c.provider, sha256: createHash('sha256').update(content).digest('hex') }).toEqual({ provider: c.provider, sha256: c.sha256 });
    }
  });

  it('has a version probe for every bundled binary, and a binary for every probe', () => {
    const unprobed = catalog.binaries.filter((b) => !probes.some((p) => p.matches(b))).map((b) => b.name);
    expect(unprobed, 'binaries with no version probe in this test').toEqual([]);
    const missing = probes.filter((p) => !catalog.binaries.some((b) => p.matches(b))).map((p) => p.what);
    expect(missing, 'expected binaries absent from the bundle').toEqual([]);
  });

  it.each(probes.map((p) => [p.what, p] as const))('%s prints the version the manifest names', async (_what, probe) => {
    const binary = catalog.binaries.find((b) => probe.matches(b));
    expect(binary, `${probe.what} is not in the bundle`).toBeDefined();
    const b = binary as BundledBinary;
    // The manifest's version is the version of the module the binary was built from.
    expect(withoutV(b.version)).toBe(withoutV(b.moduleVersion));
    if (probe.fromBuildInfo) {
      const stamped = probe.pattern.exec((await readFile(paths[b.name]!)).toString('latin1'))?.[1];
      expect(stamped, `${b.name}: its module is not in its build information`).toBeDefined();
      expect(withoutV(stamped!)).toBe(withoutV(b.version));
      return;
    }
    const ran = await runBinary(paths[probe.runAs ?? b.name]!, probe.args(scratch), scratch);
    const printed = probe.pattern.exec(ran.output)?.[1];
    expect(printed, `${b.name} ${probe.args(scratch).join(' ')} printed:\n${ran.output.slice(0, 2000)}`).toBeDefined();
    expect(withoutV(printed!)).toBe(withoutV(b.version));
    if (probe.exitsNonZero) expect(ran.code).not.toBe(0);
    else expect(ran.code).toBe(0);
  });

  it('prints the exact strings the pinned versions produce', async () => {
    const kube = catalog.binaries.find(isKube)!;
    const etcd = catalog.binaries.find((b) => b.module === 'go.etcd.io/etcd/server/v3')!;
    expect((await runBinary(paths['kube-apiserver']!, ['--version'], scratch)).output).toContain(`Kubernetes ${kube.version}`);
    // Called by no component's name and given none, it says how to call it (exit 2).
    const bare = await runBinary(paths.kube!, [], scratch);
    expect(bare.code).toBe(2);
    expect(bare.output).toContain('Components: kube-apiserver, kube-controller-manager, kube-proxy, kube-scheduler, kubeadm, kubelet');
    expect((await runBinary(paths[etcd.name]!, ['--version'], scratch)).output).toContain(`etcd Version: ${withoutV(etcd.version)}`);
  });
});

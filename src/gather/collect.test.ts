import { generateKeyPairSync } from 'node:crypto';
import { mkdir, mkdtemp, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as tar from 'tar';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { InternalError } from '../errors.js';
import { RecordingSink } from '../../test/support/recording-sink.js';
import type { KubeClient, KubeObject } from '../kube/client.js';
import { gatherBundle, gatherStages, verifyArchive } from './collect.js';

const rsaPem = generateKeyPairSync('rsa', { modulusLength: 1024 }).privateKey.export({ type: 'pkcs1', format: 'pem' }).toString();
const pkcs8Pem = generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
const keyBodyLine = rsaPem.split('\n')[3]!;
const b64 = (s: string) => Buffer.from(s).toString('base64');

/** Secrets planted in the fake install dir: none may be in the bundle. */
const planted = {
  bearer: '8f14e45fceea167a5a36dedd4bea2543',
  jwt: 'eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW06YWRtaW4ifQ.c2lnbmF0dXJlMTIzNDU2Nzg5',
  bootstrapToken: 'k3x9p2.a8b7c6d5e4f3g2h1',
  awsKeyId: 'AKIAIOSFODNN7EXAMPLE',
  awsSecret: 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY',
  secretJsonValue: b64('secret-in-a-log-line'),
  urlPassword: 'pr0xy-p4ssw0rd',
  kubeconfigKey: b64(pkcs8Pem),
  pkiKeyLine: pkcs8Pem.split('\n')[1]!,
};

/** Reads every file of a tar.gz into memory: path → content. */
async function readArchive(file: string): Promise<Map<string, string>> {
  const files = new Map<string, string>();
  await tar.t({
    file,
    onReadEntry: (entry) => {
      const chunks: Buffer[] = [];
      entry.on('data', (c: Buffer) => chunks.push(c));
      entry.on('end', () => {
        if (entry.type === 'File') files.set(entry.path, Buffer.concat(chunks).toString('utf8'));
      });
    },
  });
  return files;
}

async function put(file: string, content: string): Promise<void> {
  await mkdir(join(file, '..'), { recursive: true });
  await writeFile(file, content);
}

describe('gatherBundle', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'gather-'));
    await put(join(dir, 'logs', 'etcd.log'), `{"level":"info","msg":"starting etcd"}\n${rsaPem}{"level":"info","msg":"serving client traffic"}\n`);
    await put(join(dir, 'logs', 'kube-apiserver.log'), `I0101 request headers Authorization: Bearer ${planted.bearer}\nI0101 token ${planted.jwt} accepted\nI0101 apiserver ready\n`);
    await put(join(dir, 'logs', 'capi-manager.log'), `{"msg":"applying","object":{"kind":"Secret","data":{"value":"${planted.secretJsonValue}"}}}\nI0101 Reconciling Cluster demo/demo\n`);
    await put(join(dir, 'logs', 'capi-manager.log.1'), `I0100 older part of the capi log\nproxy http://user:${planted.urlPassword}@proxy:3128\n`);
    await put(join(dir, 'logs', 'kubeadm-bootstrap-manager.log'), `I0101 generated join token: ${planted.bootstrapToken}\n`);
    await put(join(dir, 'logs', 'not-a-log.bin'), 'ignored');
    await put(join(dir, '.provisioner', 'journal.json'), JSON.stringify({ version: 1, runs: 1, stages: { preflight: { state: 'succeeded' } } }));
    await put(join(dir, '.provisioner', 'timings.json'), JSON.stringify({ preflight: 1200 }));
    await put(join(dir, 'logs', 'provisioner.log'), `debug: loaded credentials ${planted.awsKeyId} aws_secret_access_key=${planted.awsSecret}\ndebug: done\n`);
    await put(join(dir, '.provisioner', 'controlplane', 'ports.json'), JSON.stringify({ apiServer: { secure: 43211 } }));
    await put(
      join(dir, '.provisioner', 'controlplane', 'pids', 'etcd.json'),
      JSON.stringify({ name: 'etcd', pid: 2 ** 22 + 17, startTime: '1', binary: '/x/etcd', argsHash: 'h', ports: { client: 1, metrics: 2 }, logFile: join(dir, 'logs', 'etcd.log'), detached: false, ownerPid: 1, startedAt: '2025-01-01T00:00:00Z' }),
    );
    await put(join(dir, '.provisioner', 'controlplane', 'pki', 'ca.key'), pkcs8Pem);
    await put(join(dir, '.provisioner', 'controlplane', 'etcd', 'member', 'snap', 'db'), `etcd-data ${planted.pkiKeyLine}`);
    await put(join(dir, 'auth', 'management.kubeconfig'), `users:\n- name: admin\n  user:\n    client-key-data: ${planted.kubeconfigKey}\n`);
    await put(join(dir, 'install-config.yaml'), 'apiVersion: provisioner.dev/v1alpha1\nkind: InstallConfig\nmetadata:\n  name: demo\n');
    await put(join(dir, 'cluster-api', '01_cluster.yaml'), 'apiVersion: cluster.x-k8s.io/v1beta2\nkind: Cluster\nmetadata:\n  name: demo\n');
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('writes every log and state file, redacted, and nothing from pki/, etcd/ or auth/', async () => {
    const sink = new RecordingSink();
    const result = await gatherBundle({ dir, events: sink, now: new Date('2025-02-03T04:05:06.789Z') });

    expect(result.path).toBe(join(dir, 'log-bundle-20250203T040506Z.tar.gz'));
    expect((await stat(result.path)).mode & 0o777).toBe(0o600);
    expect(result.objects).toBe(0);
    expect(result.redactions).toBeGreaterThanOrEqual(8);

    const files = await readArchive(result.path);
    const root = 'log-bundle-20250203T040506Z/';
    const names = [...files.keys()].map((p) => p.slice(root.length)).sort();
    expect(names).toEqual(
      [
        'README.txt',
        'config/cluster-api/01_cluster.yaml',
        'config/install-config.yaml',
        'controlplane/pids/etcd.json',
        'controlplane/ports.json',
        'logs/capi-manager.log',
        'logs/capi-manager.log.1',
        'logs/etcd.log',
        'logs/kube-apiserver.log',
        'logs/kubeadm-bootstrap-manager.log',
        'logs/provisioner.log',
        'processes.json',
        'state/journal.json',
        'state/timings.json',
      ].sort(),
    );
    for (const path of files.keys()) expect(path).not.toMatch(/pki|etcd\/|auth|kubeconfig/);

    const all = [...files.values()].join('\n');
    for (const [what, value] of Object.entries(planted)) expect(all, what).not.toContain(value);
    expect(all).not.toContain(keyBodyLine);
    expect(all).not.toMatch(/BEGIN (RSA |EC )?PRIVATE KEY/);

    // The logs are there, with the lines around the secrets intact.
    expect(files.get(`${root}logs/etcd.log`)).toBe('{"level":"info","msg":"starting etcd"}\n[REDACTED]\n{"level":"info","msg":"serving client traffic"}\n');
    expect(files.get(`${root}logs/kube-apiserver.log`)).toContain('I0101 apiserver ready');
    expect(files.get(`${root}logs/capi-manager.log`)).toContain('"data":{"value":"[REDACTED]"}');
    expect(files.get(`${root}logs/capi-manager.log.1`)).toContain('I0100 older part of the capi log');
    expect(files.get(`${root}logs/provisioner.log`)).toContain('debug: done');
    expect(JSON.parse(files.get(`${root}state/journal.json`)!)).toMatchObject({ runs: 1 });

    const processes = JSON.parse(files.get(`${root}processes.json`)!) as { name: string; running: boolean }[];
    expect(processes).toEqual([expect.objectContaining({ name: 'etcd', running: false })]);

    const readme = files.get(`${root}README.txt`)!;
    expect(readme).toContain('logs/etcd.log');
    expect(readme).toMatch(/logs\/etcd\.log\s+\d+\s+1 private-key\n/);
    expect(readme).toContain('no control plane was reachable');

    // Nothing left behind but the bundle.
    expect((await readdir(dir)).filter((n) => n.startsWith('.log-bundle') || n.endsWith('.tmp'))).toEqual([]);
    expect(sink.ofType('stage').map((e) => `${e.stage}:${e.state}`)).toEqual([
      'gather/files:started',
      'gather/files:succeeded',
      'gather/archive:started',
      'gather/archive:succeeded',
      'gather/verify:started',
      'gather/verify:succeeded',
    ]);
  });

  it('writes to --output, into a directory with the default name, and works on an empty dir', async () => {
    const empty = await mkdtemp(join(tmpdir(), 'gather-empty-'));
    try {
      const explicit = join(empty, 'out', 'bundle.tgz');
      expect((await gatherBundle({ dir: empty, output: explicit })).path).toBe(explicit);
      const inDir = await gatherBundle({ dir: empty, output: empty, now: new Date('2025-01-01T00:00:00Z') });
      expect(inDir.path).toBe(join(empty, 'log-bundle-20250101T000000Z.tar.gz'));
      const files = await readArchive(inDir.path);
      expect([...files.keys()].map((p) => p.split('/').slice(1).join('/')).sort()).toEqual(['README.txt', 'processes.json']);
    } finally {
      await rm(empty, { recursive: true, force: true });
    }
  });

  it('with a client: CAPI objects with status, machines, events and Secret names, never Secret values', async () => {
    const secretValue = 'sup3r-s3cret-value-42';
    await put(join(dir, 'logs', 'capi-manager.log'), `I0101 a controller that leaked ${secretValue} into its log\n`);
    const objects: Record<string, KubeObject[]> = {
      'v1/Secret': [
        { apiVersion: 'v1', kind: 'Secret', metadata: { name: 'demo-kubeconfig', namespace: 'demo', ownerReferences: [{ apiVersion: 'x', kind: 'Cluster', name: 'demo', uid: 'u' }] }, type: 'cluster.x-k8s.io/secret', data: { value: b64(secretValue) } },
      ],
      'v1/Event': [
        { apiVersion: 'v1', kind: 'Event', metadata: { name: 'e1', namespace: 'demo' }, type: 'Warning', reason: 'Failed', message: `token ${planted.jwt}`, involvedObject: { kind: 'Machine', namespace: 'demo', name: 'demo-cp-0' }, lastTimestamp: '2025-01-01T00:00:01Z' },
      ],
      'cluster.x-k8s.io/v1beta2/Cluster': [
        { apiVersion: 'cluster.x-k8s.io/v1beta2', kind: 'Cluster', metadata: { name: 'demo', namespace: 'demo', managedFields: [{ manager: 'm' }] }, spec: {}, status: { phase: 'Provisioning', conditions: [{ type: 'Available', status: 'False', reason: 'NotAvailable', message: '* InfrastructureReady: waiting\n* ControlPlane: waiting' }] } },
      ],
      'cluster.x-k8s.io/v1beta2/Machine': [
        { apiVersion: 'cluster.x-k8s.io/v1beta2', kind: 'Machine', metadata: { name: 'demo-cp-0', namespace: 'demo' }, spec: { clusterName: 'demo', providerID: 'dev://demo-cp-0' }, status: { phase: 'Provisioned', addresses: [{ type: 'InternalIP', address: '10.1.2.3' }] } },
      ],
    };
    const discovery: Record<string, unknown> = {
      '/readyz': 'ok',
      '/apis': { groups: [
        { name: 'cluster.x-k8s.io', versions: [{ groupVersion: 'cluster.x-k8s.io/v1beta2' }, { groupVersion: 'cluster.x-k8s.io/v1beta1' }], preferredVersion: { groupVersion: 'cluster.x-k8s.io/v1beta2' } },
        { name: 'apps', versions: [{ groupVersion: 'apps/v1' }], preferredVersion: { groupVersion: 'apps/v1' } },
      ] },
      '/apis/cluster.x-k8s.io/v1beta2': { resources: [
        { name: 'clusters', kind: 'Cluster', namespaced: true, verbs: ['list', 'get'] },
        { name: 'clusters/status', kind: 'Cluster', namespaced: true, verbs: ['get'] },
        { name: 'machines', kind: 'Machine', namespaced: true, verbs: ['list'] },
      ] },
      '/apis/cluster.x-k8s.io/v1beta1': { resources: [{ name: 'clusters', kind: 'Cluster', namespaced: true, verbs: ['list'] }] },
    };
    const listed: string[] = [];
    const fake = {
      server: 'https://127.0.0.1:1',
      async raw(path: string) {
        const body = discovery[path];
        if (body === undefined) throw new Error(`unexpected GET ${path}`);
        return typeof body === 'string' ? body : JSON.stringify(body);
      },
      async list(apiVersion: string, kind: string) {
        listed.push(`${apiVersion}/${kind}`);
        return objects[`${apiVersion}/${kind}`] ?? [];
      },
    } as unknown as KubeClient; // a stand-in for the two calls gather makes

    const result = await gatherBundle({ dir, client: fake, notes: ['test note'], now: new Date('2025-02-03T04:05:06Z') });
    expect(listed).toEqual(['v1/Secret', 'cluster.x-k8s.io/v1beta2/Cluster', 'cluster.x-k8s.io/v1beta2/Machine', 'v1/Event']);
    expect(result.objects).toBe(2);
    expect(result.problems).toEqual([]);

    const files = await readArchive(result.path);
    const get = (p: string) => files.get(`log-bundle-20250203T040506Z/${p}`) ?? '';
    const all = [...files.values()].join('\n');
    expect(all).not.toContain(secretValue);
    expect(all).not.toContain(b64(secretValue));
    expect(all).not.toContain(planted.jwt);
    expect(get('logs/capi-manager.log')).toBe('I0101 a controller that leaked [REDACTED] into its log\n');
    expect(get('resources/cluster.x-k8s.io/clusters.yaml')).toContain('phase: Provisioning');
    expect(get('resources/cluster.x-k8s.io/clusters.yaml')).toContain('reason: NotAvailable');
    expect(get('resources/cluster.x-k8s.io/clusters.yaml')).not.toContain('managedFields');
    expect(get('resources/status.txt')).toContain('Cluster demo/demo  phase=Provisioning\n  Available=False NotAvailable: * InfrastructureReady: waiting\n      * ControlPlane: waiting');
    expect(get('resources/machines.txt')).toMatch(/demo\s+demo-cp-0\s+demo\s+Provisioned\s+-\s+dev:\/\/demo-cp-0\s+InternalIP=10\.1\.2\.3/);
    expect(get('resources/secrets.txt')).toMatch(/demo\s+demo-kubeconfig\s+cluster\.x-k8s\.io\/secret\s+value\s+Cluster\/demo/);
    expect(get('resources/events.txt')).toMatch(/Warning\s+Failed\s+Machine\/demo\/demo-cp-0/);
    expect(get('resources/events.yaml')).toContain('reason: Failed');
    expect(get('README.txt')).toContain('  - test note');
  });

  it('for cloud machines: each one\'s infrastructure objects and the provider\'s last answer and log line; no value of a credentials file in any file', async () => {
    // What a platform's credentials files hold (by path, as the platform hands them to its controller).
    const vcenterPassword = 'e2e-vcsim-password-0000';
    const awsSecret = 'Zq8kP2xLm4Nv6Rt0Yw3Bc5Df7Gh9Jk1Ls2Ma4Nb';
    const awsKeyId = 'AKIAZZZZZZZZZZZZZZZZ';
    await put(join(dir, 'vcenter.yaml'), `username: capv-e2e-operator\npassword: "${vcenterPassword}"\n`);
    await put(join(dir, 'aws-credentials'), `[default]\naws_access_key_id = ${awsKeyId}\naws_secret_access_key = ${awsSecret}\n# a comment\n`);
    // Planted where no keyword gives them away: a provider that logs its login, a fault message quoting a request.
    await put(join(dir, 'logs', 'capv-manager.log'), [
      `{"ts":"2025-01-01T00:00:05Z","msg":"session for capv-e2e-operator with ${vcenterPassword}"}`,
      '{"ts":"2025-01-01T00:00:08Z","msg":"Cloning VM","VSphereVM":{"name":"demo-cp-0","namespace":"demo"}}',
      '{"ts":"2025-01-01T00:00:09Z","msg":"VM state is \\"notReady\\", waiting for \\"ready\\"","VSphereVM":{"name":"demo-cp-0","namespace":"demo"}}',
      '{"ts":"2025-01-01T00:00:10Z","msg":"Reconciling VSphereCluster","VSphereCluster":{"name":"demo"}}',
    ].join('\n') + '\n');
    await put(join(dir, 'logs', 'capa-manager.log'), `{"ts":"2025-01-01T00:00:07Z","msg":"RunInstances failed","AWSMachine":"demo-md-0","request":"Signature=${awsSecret}"}\n`);
    const machine = (name: string, kind: string) => ({ apiVersion: 'cluster.x-k8s.io/v1beta2', kind: 'Machine', metadata: { name, namespace: 'demo' }, spec: { clusterName: 'demo', infrastructureRef: { apiGroup: 'infrastructure.cluster.x-k8s.io', kind, name } }, status: { phase: 'Provisioning' } });
    const owner = (kind: string, name: string) => [{ apiVersion: 'infrastructure.cluster.x-k8s.io/v1beta2', kind, name, uid: 'u' }];
    const objects: Record<string, KubeObject[]> = {
      'cluster.x-k8s.io/v1beta2/Machine': [machine('demo-cp-0', 'VSphereMachine'), machine('demo-md-0', 'AWSMachine'), machine('demo-md-1', 'AWSMachine')],
      'infrastructure.cluster.x-k8s.io/v1beta2/VSphereMachine': [
        { apiVersion: 'infrastructure.cluster.x-k8s.io/v1beta2', kind: 'VSphereMachine', metadata: { name: 'demo-cp-0', namespace: 'demo' }, status: { conditions: [{ type: 'VirtualMachineProvisioned', status: 'False', reason: 'NotProvisioned', lastTransitionTime: '2025-01-01T00:00:03Z' }] } },
      ],
      'infrastructure.cluster.x-k8s.io/v1beta2/VSphereVM': [
        { apiVersion: 'infrastructure.cluster.x-k8s.io/v1beta2', kind: 'VSphereVM', metadata: { name: 'demo-cp-0', namespace: 'demo', ownerReferences: owner('VSphereMachine', 'demo-cp-0') }, status: { conditions: [
          { type: 'VirtualMachineProvisioned', status: 'False', reason: 'WaitingForIPAllocation', lastTransitionTime: '2025-01-01T00:00:09Z' },
          { type: 'IPAddressClaimsFulfilled', status: 'True', reason: 'Fulfilled', lastTransitionTime: '2025-01-01T00:00:06Z' },
        ] } },
      ],
      'infrastructure.cluster.x-k8s.io/v1beta2/AWSMachine': [
        { apiVersion: 'infrastructure.cluster.x-k8s.io/v1beta2', kind: 'AWSMachine', metadata: { name: 'demo-md-0', namespace: 'demo' }, status: { failureReason: 'CreateError', failureMessage: `UnauthorizedOperation for key ${awsKeyId}`, conditions: [{ type: 'InstanceReady', status: 'False', reason: 'InstanceProvisionFailed', message: `AuthFailure: signature ${awsSecret} does not match`, lastTransitionTime: '2025-01-01T00:00:07Z' }] } },
      ],
      'ipam.cluster.x-k8s.io/v1beta2/IPAddressClaim': [
        { apiVersion: 'ipam.cluster.x-k8s.io/v1beta2', kind: 'IPAddressClaim', metadata: { name: 'demo-cp-0-0-0', namespace: 'demo', ownerReferences: owner('VSphereVM', 'demo-cp-0') }, status: { conditions: [{ type: 'Ready', status: 'True', reason: 'AddressAllocated', lastTransitionTime: '2025-01-01T00:00:04Z' }] } },
      ],
    };
    const resources = (list: [string, string][]) => ({ resources: list.map(([name, kind]) => ({ name, kind, namespaced: true, verbs: ['list'] })) });
    const discovery: Record<string, unknown> = {
      '/readyz': 'ok',
      '/apis': { groups: ['cluster.x-k8s.io', 'infrastructure.cluster.x-k8s.io', 'ipam.cluster.x-k8s.io'].map((name) => ({ name, versions: [{ groupVersion: `${name}/v1beta2` }], preferredVersion: { groupVersion: `${name}/v1beta2` } })) },
      '/apis/cluster.x-k8s.io/v1beta2': resources([['machines', 'Machine']]),
      '/apis/infrastructure.cluster.x-k8s.io/v1beta2': resources([['vspheremachines', 'VSphereMachine'], ['vspherevms', 'VSphereVM'], ['awsmachines', 'AWSMachine']]),
      '/apis/ipam.cluster.x-k8s.io/v1beta2': resources([['ipaddressclaims', 'IPAddressClaim']]),
    };
    const fake = {
      server: 'https://127.0.0.1:1',
      async raw(path: string) {
        const body = discovery[path];
        if (body === undefined) throw new Error(`unexpected GET ${path}`);
        return typeof body === 'string' ? body : JSON.stringify(body);
      },
      async list(apiVersion: string, kind: string) {
        return objects[`${apiVersion}/${kind}`] ?? [];
      },
    } as unknown as KubeClient; // a stand-in for the two calls gather makes

    const credentialFiles = [join(dir, 'vcenter.yaml'), join(dir, 'aws-credentials')];
    const result = await gatherBundle({ dir, client: fake, credentialFiles, now: new Date('2025-02-03T04:05:06Z') });
    expect(result.problems).toEqual([]);
    const files = await readArchive(result.path);
    for (const [file, content] of files) {
      for (const value of [vcenterPassword, awsSecret, awsKeyId]) expect(content, `${file} holds a credential value`).not.toContain(value);
    }
    const report = files.get('log-bundle-20250203T040506Z/resources/machines-infrastructure.txt') ?? '';
    expect(report).toContain([
      'Machine demo/demo-cp-0: infrastructure VSphereMachine demo-cp-0',
      '  VSphereMachine demo-cp-0: VirtualMachineProvisioned=False NotProvisioned',
      '  VSphereVM demo-cp-0: VirtualMachineProvisioned=False WaitingForIPAllocation',
      '  IPAddressClaim demo-cp-0-0-0: every condition True',
      '  last answer recorded (latest condition change): 2025-01-01T00:00:09Z VSphereVM demo-cp-0 VirtualMachineProvisioned=False WaitingForIPAllocation',
      '  last provider log line naming it: (logs/capv-manager.log) {"ts":"2025-01-01T00:00:09Z","msg":"VM state is \\"notReady\\", waiting for \\"ready\\"","VSphereVM":{"name":"demo-cp-0","namespace":"demo"}}',
    ].join('\n'));
    expect(report).toContain([
      'Machine demo/demo-md-0: infrastructure AWSMachine demo-md-0',
      '  AWSMachine demo-md-0: InstanceReady=False InstanceProvisionFailed: AuthFailure: signature [REDACTED] does not match',
      '    failure: CreateError UnauthorizedOperation for key [REDACTED]',
    ].join('\n'));
    expect(report).toContain('  last provider log line naming it: (logs/capa-manager.log) {"ts":"2025-01-01T00:00:07Z","msg":"RunInstances failed","AWSMachine":"demo-md-0","request":"Signature=[REDACTED]"}');
    expect(report).toContain('Machine demo/demo-md-1: infrastructure AWSMachine demo-md-1\n  the infrastructure machine does not exist (not created yet, or deleted)');

    // Without the credentials files, the planted password reaches the bundle: what the option prevents.
    const unprotected = await gatherBundle({ dir, client: fake, output: join(dir, 'unprotected.tar.gz') });
    expect([...(await readArchive(unprotected.path)).values()].join('\n')).toContain(vcenterPassword);
  });

  it('records what it could not gather and still writes the bundle', async () => {
    const fake = {
      server: 'https://127.0.0.1:1',
      async raw() {
        throw new Error('connection refused');
      },
      async list() {
        throw new Error('not called');
      },
    } as unknown as KubeClient; // an API server that does not answer
    const sink = new RecordingSink();
    const result = await gatherBundle({ dir, client: fake, events: sink });
    expect(result.problems).toEqual([expect.stringContaining('is not ready')]);
    const files = await readArchive(result.path);
    const errors = [...files.entries()].find(([p]) => p.endsWith('/errors.txt'))?.[1];
    expect(errors).toContain('connection refused');
    expect([...files.entries()].find(([p]) => p.endsWith('/README.txt'))?.[1]).toContain('no control plane was reachable');
    expect(sink.ofType('log').some((e) => e.level === 'warn' && e.message.includes('connection refused'))).toBe(true);
  });

  it('stops with InterruptedError when aborted, leaving nothing behind', async () => {
    const abort = new AbortController();
    abort.abort();
    await expect(gatherBundle({ dir, signal: abort.signal })).rejects.toMatchObject({ exitCode: 'interrupted' });
    expect((await readdir(dir)).filter((n) => n.includes('log-bundle'))).toEqual([]);
  });
});

describe('gatherStages', () => {
  it('is the one declared list: the Secrets and objects only with a client that answers', () => {
    const none = async () => undefined;
    const bodies = { secrets: none, files: none, objects: none, archive: none, verify: none };
    const names = (withObjects: boolean) => gatherStages(withObjects, bodies).filter((s) => s.when !== false).map((s) => s.name);
    expect(names(true)).toEqual(['gather/secrets', 'gather/files', 'gather/objects', 'gather/archive', 'gather/verify']);
    expect(names(false)).toEqual(['gather/files', 'gather/archive', 'gather/verify']);
  });
});

describe('verifyArchive', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'gather-verify-'));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  async function archive(files: Record<string, string>): Promise<string> {
    for (const [name, content] of Object.entries(files)) await put(join(dir, 'src', name), content);
    const file = join(dir, 'a.tar.gz');
    await tar.c({ gzip: true, cwd: join(dir, 'src'), file }, Object.keys(files));
    return file;
  }

  it('passes a clean archive', async () => {
    await expect(verifyArchive(await archive({ 'logs/a.log': 'fine\ntoken: [REDACTED]\n' }))).resolves.toBeUndefined();
  });

  it('fails loudly on a surviving key, token or known value, naming where but not the value', async () => {
    const file = await archive({ 'logs/a.log': `ok\n${rsaPem}`, 'b.txt': `x\nAuthorization: Bearer ${planted.bearer}\nvalue s3cr3t-known-value\n` });
    const error = await verifyArchive(file, /s3cr3t-known-value/g).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(InternalError);
    const details = (error as InternalError).details.join('\n');
    expect(details).toContain('logs/a.log:2: private-key');
    expect(details).toContain('b.txt:2: bearer-token');
    expect(details).toContain('b.txt:3: secret-data');
    expect(`${(error as Error).message}\n${details}`).not.toContain(planted.bearer);
    expect(details).not.toContain(keyBodyLine);
  });

  it('fails on a pki/ or auth/ path even when its content looks clean', async () => {
    await expect(verifyArchive(await archive({ 'x/pki/ca.crt': 'clean' }))).rejects.toThrow(/final check/);
  });
});

/**
 * Hosts with real processes: the management cluster runs inside a "machine" network
 * namespace and listens on loopback and on 198.18.0.1 only (`--listen-address`, served by
 * provisioner-forwarder); three hosts, each a network namespace on a bridge with a real
 * provisioner-agent and its own state, reach it only through that address
 * (test/support/netns.ts). Covers the issue's list: registration (token used once,
 * bootstrap token gone from disk, a restart does not re-register, an expired or reused
 * token refused, a deleted host's credential refused); plans that write files with modes,
 * keep instruction output, wait on an HTTPS probe whose CA comes from a Secret, retry until
 * a condition holds, fail a required preflight, time out; two plans for one node; SIGKILL
 * of the agent mid-instruction; the webhook and the force-update annotation; a content
 * reference whose digest does not match.
 */
import { createHash } from 'node:crypto';
import { access, mkdir, readFile, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCertificateAuthority, issueCertificate } from '../../src/pki/certificates.js';
import { waitFor } from '../integration/support/controlplane.js';
import { cli, ensureBuilt } from './support/cli.js';
import { HostsLab, type NodePlanView, type RunningAgent } from './support/hosts-lab.js';
import { step } from './support/steps.js';

const exists = (file: string) => access(file).then(() => true, () => false);
const sha256 = (text: string) => `sha256:${createHash('sha256').update(text).digest('hex')}`;

let lab: HostsLab;
const agents: RunningAgent[] = [];

// The steps the tests stand on (step(): at most once per file), so each test also passes alone.
/** `management start` in the machine namespace, listening on 198.18.0.1. */
const managementStarted = step(() => lab.startManagement());
/** h0 registered with the first token printed; resolves to that token. */
const firstRegistration = step(async () => {
  const start = await managementStarted();
  expect(start.exitCode, `management start failed:\n${start.stderr}`).toBe(0);
  const printed = await lab.registrationCommand();
  return { printed, register: await lab.register(lab.hosts[0]!, printed) };
});
/** A fresh token: used again on the registered h0 (no new registration), then on h1, which it registers. */
const secondRegistration = step(async () => {
  await firstRegistration();
  const fresh = await lab.registrationCommand();
  return { again: await lab.register(lab.hosts[0]!, fresh), other: await lab.register(lab.hosts[1]!, fresh) };
});

beforeAll(async () => {
  await ensureBuilt();
  lab = await HostsLab.create(3);
}, 120_000);

afterAll(async () => {
  for (const agent of agents) agent.process.kill('SIGKILL');
  await lab?.remove();
}, 300_000);

async function phase(hostIndex: number, name: string, want: string | readonly string[], timeoutMs = 120_000): Promise<NodePlanView> {
  const wanted = typeof want === 'string' ? [want] : want;
  let last: NodePlanView | undefined;
  try {
    return await waitFor(`plan ${name} ${wanted.join(' or ')}`, async () => {
      last = await lab.plan(lab.hosts[hostIndex]!, name);
      return last?.status?.phase && wanted.includes(last.status.phase) ? last : undefined;
    }, timeoutMs);
  } catch (error) {
    throw new Error(`${String(error)}; last seen: ${JSON.stringify(last?.status)}`, { cause: error });
  }
}

/** An instruction that logs its start and end to `log` and records an overlap with a run still alive (the provider's Go tests use the same). */
function logged(name: string, log: string, seconds: number) {
  return {
    name,
    command: '/bin/sh',
    args: ['-c', [
      'if [ -f "$1.pid" ]; then state=$(awk \'{print $3}\' "/proc/$(cat "$1.pid")/stat" 2>/dev/null); if [ -n "$state" ] && [ "$state" != Z ]; then echo "overlap $0" >> "$1"; fi; fi',
      'echo $$ > "$1.pid"', 'echo "start $0" >> "$1"', 'sleep "$2"', 'echo "end $0" >> "$1"', 'rm -f "$1.pid"',
    ].join('\n'), name, log, String(seconds)],
  };
}

describe('the local control plane listens on loopback and the one named address', () => {
  it('management start --listen-address runs the forwarder; nothing listens on another address', async () => {
    const start = await managementStarted();
    expect(start.exitCode, start.stderr).toBe(0);
    expect(start.stderr).toMatch(/reachable for hosts on https:\/\/198\.18\.0\.1:\d+/);
    const status = await lab.cli(['management', 'status', '--dir', lab.mgmt]);
    expect(status.stdout).toMatch(/^provisioner-forwarder\s+\d+\s+healthy\s/m);
    // Every listening TCP socket of the machine namespace is on loopback or 198.18.0.1, none on a wildcard.
    const sockets = await lab.net.run(lab.net.machine.namespace, 'ss', ['-Hltn']);
    const addresses = sockets.stdout.split('\n').filter(Boolean).map((line) => line.trim().split(/\s+/)[3]!.replace(/:\d+$/, ''));
    expect(addresses.length).toBeGreaterThan(5);
    expect(addresses.filter((a) => !['127.0.0.1', '[::1]', '198.18.0.1'].includes(a))).toEqual([]);
    expect(addresses).toContain('198.18.0.1');
  }, 660_000);

  it('refuses an address that is not this machine\'s, naming the flag or the install-config field', async () => {
    const flag = await lab.cli(['management', 'start', '--dir', path.join(lab.net.root, 'elsewhere'), '--listen-address', '203.0.113.9']);
    expect(flag.exitCode).toBe(2);
    expect(flag.stderr).toContain('--listen-address 203.0.113.9: 203.0.113.9 is not an address of this machine (its addresses: 198.18.0.1');

    const dir = path.join(lab.net.root, 'field');
    expect((await cli(['create', 'install-config', '--dir', dir, '--name', 'field'], 60_000)).exitCode).toBe(0);
    await writeFile(path.join(dir, 'install-config.yaml'), `${await readFile(path.join(dir, 'install-config.yaml'), 'utf8')}bootstrap:\n  listenAddress: 203.0.113.9\n`);
    const field = await lab.cli(['create', 'cluster', '--dir', dir], 120_000);
    expect(field.exitCode, field.stderr).toBe(3);
    expect(field.stderr).toContain('bootstrap.listenAddress: 203.0.113.9 is not an address of this machine');
  }, 300_000);
});

describe('registration through the listen address', () => {
  it('registration-command prints the listen address; a host registers with it, the token file is deleted, the credential is 0600', async () => {
    const { printed: first, register } = await firstRegistration();
    expect(first.server).toMatch(/^https:\/\/198\.18\.0\.1:\d+$/);
    expect(first.stdout).not.toContain('loopback');
    const [h0] = lab.hosts;
    expect(register.exitCode, register.stderr).toBe(0);
    expect(register.stdout).toContain(`registered as host ${h0!.name}`);
    const files = HostsLab.files(h0!);
    expect((await stat(path.join(files.data, 'credential.json'))).mode & 0o777).toBe(0o600);
    expect(await exists(files.tokenFile)).toBe(false);
    expect(await exists(path.join(files.data, 'bootstrap.json'))).toBe(false);
    const list = await lab.cli(['hosts', 'list', '--dir', lab.mgmt]);
    expect(list.stdout).toMatch(new RegExp(`^${h0!.name}\\s+198\\.18\\.0\\.10\\s+Registered\\s`, 'm'));
  }, 660_000); // alone, it starts the management cluster first

  // Before secondRegistration registers h1 (in file order; alone, it runs first).
  it('the used token is refused on another host', async () => {
    const { printed: first } = await firstRegistration();
    const reuse = await lab.register(lab.hosts[1]!, first);
    expect(reuse.exitCode).toBe(3);
    expect(reuse.stderr).toMatch(/refused/);
  }, 660_000); // alone, it starts the management cluster first

  it('register again on a registered host does not register: the fresh token stays unused and registers another host', async () => {
    const { again, other } = await secondRegistration();
    expect(again.exitCode, again.stderr).toBe(0);
    expect(again.stdout).toContain(`already registered as host ${lab.hosts[0]!.name}`);
    expect(other.exitCode, other.stderr).toBe(0);
  }, 660_000); // alone, it starts the management cluster first

  it('an expired token is refused', async () => {
    await managementStarted();
    const short = await lab.registrationCommand('2s');
    await new Promise((resolve) => setTimeout(resolve, 4_000));
    const late = await lab.register(lab.hosts[2]!, short);
    expect(late.exitCode).toBe(3);
    expect(late.stderr).toMatch(/refused|expired/);
  }, 660_000); // alone, it starts the management cluster first
});

describe('plans executed by agents in the host namespaces', () => {
  beforeAll(async () => {
    const { again, other } = await secondRegistration();
    expect([again.exitCode, other.exitCode], `registering h0 and h1 failed:\n${again.stderr}\n${other.stderr}`).toEqual([0, 0]);
    agents.push(lab.startAgent(lab.hosts[0]!), lab.startAgent(lab.hosts[1]!));
  }, 660_000);

  it('writes files with their modes and keeps the instruction output, run inside the host', async () => {
    const [h0] = lab.hosts;
    const conf = path.join(h0!.dir, 'app.conf');
    const secret = path.join(h0!.dir, 'secret');
    const apply = await lab.applyPlan(h0!, 'files', {
      files: [{ path: conf, content: 'mode = 0640\n', mode: '0640' }, { path: secret, content: 'key\n', mode: '0600' }],
      instructions: [{ name: 'addresses', command: '/usr/sbin/ip', args: ['-br', 'addr'], saveOutput: true }],
    });
    expect(apply.exitCode, apply.stderr).toBe(0);
    const done = await phase(0, 'files', 'Applied');
    expect(await readFile(conf, 'utf8')).toBe('mode = 0640\n');
    expect((await stat(conf)).mode & 0o777).toBe(0o640);
    expect((await stat(secret)).mode & 0o777).toBe(0o600);
    // The output shows the host's own interfaces: the instruction ran in h0's namespace.
    expect(done.status?.instructions?.[0]?.output).toMatch(/^eth0@\S+\s+UP\s+198\.18\.0\.10\/16 /m);
    expect(done.status?.observedGeneration).toBe(done.metadata.generation);
  }, 300_000);

  it('waits on an HTTPS probe whose CA comes from a Secret until the server answers', async () => {
    const [h0] = lab.hosts;
    const ca = await createCertificateAuthority({ commonName: 'probe-ca' });
    const serving = await issueCertificate(ca, { commonName: 'probe', ipAddresses: [h0!.address], usages: 'server' });
    const secret = { apiVersion: 'v1', kind: 'Secret', metadata: { name: 'probe-ca', namespace: `host-${h0!.name}` }, stringData: { 'ca.crt': ca.certPem } };
    expect((await lab.kubectl(['apply', '-f', '-'], JSON.stringify(secret))).exitCode).toBe(0);
    const url = `https://${h0!.address}:8443/ready`;
    expect((await lab.applyPlan(h0!, 'probe', {
      probes: [{ name: 'web', httpGet: { url, caSecretRef: { name: 'probe-ca', key: 'ca.crt' } }, periodSeconds: 1, failureThreshold: 120 }],
    })).exitCode).toBe(0);
    await waitFor('the probe failing while no server runs', async () => {
      const web = (await lab.plan(h0!, 'probe'))?.status?.probeStatuses?.[0];
      return web !== undefined && !web.healthy && (web.failureCount ?? 0) >= 1 && Boolean(web.lastMessage);
    }, 60_000);
    // A few more periods with nothing listening: the plan keeps waiting.
    await new Promise((resolve) => setTimeout(resolve, 3_000));
    expect((await lab.plan(h0!, 'probe'))?.status?.phase).toBe('Executing');

    await writeFile(path.join(h0!.dir, 'tls.crt'), serving.certPem);
    await writeFile(path.join(h0!.dir, 'tls.key'), serving.keyPem, { mode: 0o600 });
    const server = lab.net.spawn(h0!.namespace, process.execPath, ['-e', `
      const fs = require('node:fs');
      require('node:https').createServer({ cert: fs.readFileSync('${h0!.dir}/tls.crt'), key: fs.readFileSync('${h0!.dir}/tls.key') }, (q, s) => s.end('ok')).listen(8443, '${h0!.address}');
    `]);
    try {
      const done = await phase(0, 'probe', 'Applied', 60_000);
      expect(done.status?.probeStatuses?.[0]).toMatchObject({ name: 'web', healthy: true });
    } finally {
      server.kill('SIGKILL');
    }
  }, 300_000);

  it('retries with backoff until the condition holds', async () => {
    const [h0] = lab.hosts;
    const marker = path.join(h0!.dir, 'ready-marker');
    expect((await lab.applyPlan(h0!, 'retry', {
      instructions: [{ name: 'check', command: '/usr/bin/test', args: ['-f', marker] }],
      retryStrategy: { maxAttempts: 30, initialBackoff: '1s', maxBackoff: '2s' },
    })).exitCode).toBe(0);
    await waitFor('a second attempt', async () => ((await lab.plan(h0!, 'retry'))?.status?.attempts ?? 0) >= 2, 60_000);
    await writeFile(marker, '');
    const done = await phase(0, 'retry', 'Applied', 60_000);
    expect(done.status?.attempts).toBeGreaterThanOrEqual(2);
  }, 300_000);

  it('a required preflight that fails fails the plan before anything runs', async () => {
    const [h0] = lab.hosts;
    const touched = path.join(h0!.dir, 'must-not-exist');
    expect((await lab.applyPlan(h0!, 'preflight', {
      preflightChecks: [{ name: 'needs-file', required: true, probe: { fileExists: { path: path.join(h0!.dir, 'absent') } } }],
      instructions: [{ name: 'touch', command: '/usr/bin/touch', args: [touched] }],
    })).exitCode).toBe(0);
    const failed = await phase(0, 'preflight', 'Failed');
    expect(JSON.stringify(failed.status)).toMatch(/needs-file/);
    expect(await exists(touched)).toBe(false);
  }, 300_000);

  it('a plan past its execution timeout fails', async () => {
    const [h0] = lab.hosts;
    expect((await lab.applyPlan(h0!, 'slow', { executionTimeout: '3s', instructions: [{ name: 'sleep', command: '/bin/sleep', args: ['60'] }] })).exitCode).toBe(0);
    const started = Date.now();
    const failed = await phase(0, 'slow', 'Failed', 60_000);
    expect(Date.now() - started).toBeLessThan(45_000);
    expect(JSON.stringify(failed.status)).toMatch(/time/i);
  }, 300_000);

  it('a content reference whose digest does not match is refused; a matching one is written', async () => {
    const [h0] = lab.hosts;
    const content = 'from a ConfigMap\n';
    const configMap = { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'content', namespace: `host-${h0!.name}` }, data: { file: content } };
    expect((await lab.kubectl(['apply', '-f', '-'], JSON.stringify(configMap))).exitCode).toBe(0);
    const target = path.join(h0!.dir, 'from-ref');
    const ref = (digest: string) => ({ files: [{ path: target, contentRef: { configMapKeyRef: { name: 'content', key: 'file' }, digest } }] });
    const refused = await lab.applyPlan(h0!, 'bad-digest', ref(sha256('something else')));
    expect(refused.exitCode).not.toBe(0);
    expect(refused.stderr).toMatch(/does not match/);
    expect(await lab.plan(h0!, 'bad-digest')).toBeUndefined();
    expect((await lab.applyPlan(h0!, 'good-digest', ref(sha256(content)))).exitCode).toBe(0);
    await phase(0, 'good-digest', 'Applied');
    expect(await readFile(target, 'utf8')).toBe(content);
  }, 300_000);

  it('a content reference url on the forwarder\'s artifacts server is fetched and checked; listing and traversal are refused', async () => {
    const [h0] = lab.hosts;
    const listen = JSON.parse(await readFile(path.join(lab.mgmt, '.provisioner/controlplane/listen.json'), 'utf8')) as { address: string; artifactsUrl?: string };
    expect(listen.artifactsUrl).toMatch(/^http:\/\/198\.18\.0\.1:\d+$/);
    const served = path.join(lab.mgmt, '.provisioner/controlplane/artifacts/node/bin');
    await mkdir(served, { recursive: true });
    const content = 'a node binary\n';
    await writeFile(path.join(served, 'tool'), content);
    const target = path.join(h0!.dir, 'from-url');
    const plan = { files: [{ path: target, mode: '0755', contentRef: { url: `${listen.artifactsUrl}/node/bin/tool`, digest: sha256(content) } }] };
    const applied = await lab.applyPlan(h0!, 'from-artifacts', plan);
    expect(applied.exitCode, applied.stderr).toBe(0);
    await phase(0, 'from-artifacts', 'Applied');
    expect(await readFile(target, 'utf8')).toBe(content);
    // From the host's namespace: the directory is not listed, nothing outside it is served.
    // Node's http sends the path as written (no `..` folding), so traversal reaches the server.
    // It exits on the status line: a kept-alive socket would hold it until the server's idle timeout.
    const status = (urlPath: string) =>
      lab.net.run(h0!.namespace, process.execPath, ['-e', `require('node:http').get({ host: '198.18.0.1', port: ${new URL(listen.artifactsUrl!).port}, path: ${JSON.stringify(urlPath)} }, (r) => { console.log(r.statusCode); process.exit(0); })`]);
    expect((await status('/node/bin/tool')).stdout.trim()).toBe('200');
    expect((await status('/node/bin/')).stdout.trim()).toBe('404');
    expect((await status('/../listen.json')).stdout.trim()).toBe('404');
    expect((await status('/node/%2e%2e/%2e%2e/listen.json')).stdout.trim()).toBe('404');
  }, 300_000);

  it('the webhook refuses a spec change while the plan is Executing and accepts it with the force-update annotation', async () => {
    const [h0] = lab.hosts;
    const ran = path.join(h0!.dir, 'replacement-ran');
    expect((await lab.applyPlan(h0!, 'running', { instructions: [{ name: 'wait', command: '/bin/sleep', args: ['120'] }] })).exitCode).toBe(0);
    await phase(0, 'running', 'Executing');
    const replacement = { spec: { instructions: [{ name: 'touch', command: '/usr/bin/touch', args: [ran] }] } };
    const refused = await lab.kubectl(['-n', `host-${h0!.name}`, 'patch', 'nodeplan', 'running', '--type', 'merge', '-p', JSON.stringify(replacement)]);
    expect(refused.exitCode).not.toBe(0);
    expect(refused.stderr).toMatch(/Executing/);
    const forced = await lab.kubectl(['-n', `host-${h0!.name}`, 'patch', 'nodeplan', 'running', '--type', 'merge', '-p',
      JSON.stringify({ ...replacement, metadata: { annotations: { 'agent.provisioner.dev/force-update': 'true' } } })]);
    expect(forced.exitCode, forced.stderr).toBe(0);
    const done = await phase(0, 'running', 'Applied', 60_000);
    expect(done.status?.observedGeneration).toBe(done.metadata.generation);
    expect(await exists(ran)).toBe(true);
  }, 300_000);

  it('two plans for one node run one at a time', async () => {
    const h1 = lab.hosts[1]!;
    const log = path.join(h1.dir, 'two-plans.log');
    expect((await lab.applyPlan(h1, 'first', { instructions: [logged('first', log, 3)] })).exitCode).toBe(0);
    expect((await lab.applyPlan(h1, 'second', { instructions: [logged('second', log, 3)] })).exitCode).toBe(0);
    await phase(1, 'first', 'Applied');
    await phase(1, 'second', 'Applied');
    const lines = (await readFile(log, 'utf8')).trim().split('\n');
    expect(lines.join('\n')).not.toContain('overlap');
    // Whichever went first, each run ended before the other started.
    expect([lines[0]!.split(' ')[1], lines[1]!.split(' ')[1]].every((n) => n === lines[0]!.split(' ')[1])).toBe(true);
    expect(lines.map((l) => l.split(' ')[0])).toEqual(['start', 'end', 'start', 'end']);
  }, 300_000);

  it('SIGKILL of the agent mid-instruction: the restarted agent takes the stale lock over and finishes the plan, never two runs at once', async () => {
    const h1 = lab.hosts[1]!;
    const log = path.join(h1.dir, 'crash.log');
    expect((await lab.applyPlan(h1, 'interrupted', { instructions: [logged('work', log, 4)], retryStrategy: { maxAttempts: 3, initialBackoff: '1s' } })).exitCode).toBe(0);
    await waitFor('the instruction started', async () => (await readFile(log, 'utf8').catch(() => '')).includes('start'), 60_000);
    const victim = agents.find((a) => a.host === h1)!;
    victim.process.kill('SIGKILL');
    await victim.process;
    const lock = JSON.parse(await readFile(HostsLab.files(h1).lock, 'utf8')) as { plan?: string; pid?: number };
    expect(lock.plan).toBe(`host-${h1.name}/interrupted`);
    expect(lock.pid).toBe(victim.process.pid);

    const restarted = lab.startAgent(h1);
    agents.push(restarted);
    const done = await phase(1, 'interrupted', ['Applied', 'Failed'], 120_000);
    expect(done.status?.phase).toBe('Applied');
    const lines = (await readFile(log, 'utf8')).trim().split('\n');
    expect(lines.join('\n')).not.toContain('overlap');
    expect(lines.filter((l) => l.startsWith('start'))).toHaveLength(2);
    expect(lines.filter((l) => l.startsWith('end'))).toHaveLength(1);
    expect(restarted.output()).toContain('resuming the plan');
  }, 300_000);

  it('a deleted host\'s credential is refused: its agent stops and says so', async () => {
    const [h0] = lab.hosts;
    const agent = agents.find((a) => a.host === h0)!;
    const deleted = await lab.kubectl(['delete', 'host', h0!.name, '--wait=false']);
    expect(deleted.exitCode, deleted.stderr).toBe(0);
    const ended = await Promise.race([agent.process, new Promise<undefined>((resolve) => setTimeout(() => resolve(undefined), 60_000))]);
    expect(ended, 'the agent still runs a minute after its Host was deleted').toBeDefined();
    expect(ended?.exitCode).toBe(3);
    expect(agent.output()).toMatch(/credential revoked/);
  }, 300_000);
});

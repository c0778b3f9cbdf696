/**
 * Hosts and the node agent, end to end on loopback: `management start` (which runs
 * capi-manager with the agent provider), `hosts registration-command`, the bundled provisioner-agent
 * registering with exactly the printed line and then running, `hosts list`, and
 * `plan apply|status|cancel` with the plan executed by the real agent. The agent runs on
 * this machine against the loopback API server (no --listen-address); hosts in network
 * namespaces reaching a listen address are hosts-namespaces.test.ts.
 */
import { randomBytes } from 'node:crypto';
import { readFile, rm, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { execa, type ResultPromise } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBinaries } from '../../src/embedded/cache.js';
import { waitFor } from '../integration/support/controlplane.js';
import { cli, ensureBuilt } from './support/cli.js';
import { runTempDir } from '../support/run-dirs.js';
import { step } from './support/steps.js';

const commandTimeoutMs = 300_000;
const host = `e2e-${randomBytes(3).toString('hex')}`;
let mgmt = '';
let hostDir = '';
let agentBinary = '';
let agent: ResultPromise | undefined;

beforeAll(async () => {
  await ensureBuilt();
  agentBinary = (await ensureBinaries(['provisioner-agent']))['provisioner-agent']!;
  mgmt = await runTempDir('e2e-hosts-mgmt');
  hostDir = await runTempDir('e2e-hosts-host');
}, commandTimeoutMs);

afterAll(async () => {
  if (agent?.pid !== undefined) {
    agent.kill('SIGTERM');
    await agent.catch(() => undefined);
  }
  if (mgmt) {
    const stop = await cli(['management', 'stop', '--dir', mgmt], commandTimeoutMs).catch(() => undefined);
    if (stop?.exitCode !== 0) process.stderr.write(`cleanup: management stop exited ${stop?.exitCode}: ${stop?.stderr}\n`);
    await rm(mgmt, { recursive: true, force: true });
  }
  if (hostDir) await rm(hostDir, { recursive: true, force: true });
}, commandTimeoutMs);

async function planPhase(name: string): Promise<string> {
  const run = await cli(['plan', 'status', '--dir', mgmt, '--host', host, name, '--output', 'json'], 60_000);
  const result = run.stdout.split('\n').filter(Boolean).map((l) => JSON.parse(l) as { type: string; data?: { status?: { phase?: string } } }).find((e) => e.type === 'result');
  return result?.data?.status?.phase ?? 'none';
}

describe('hosts: a real agent registers with the printed command and runs plans', () => {
  // Each test runs the steps it stands on (step(): at most once per file), so each also passes alone.
  const start = step(async () => {
    const run = await cli(['management', 'start', '--dir', mgmt], commandTimeoutMs);
    expect(run.exitCode, run.stderr).toBe(0);
    expect(run.stderr).toMatch(/capi-manager ready/); // the agent provider's process
  });

  const register = step(async () => {
    await start();
    const run = await cli(['hosts', 'registration-command', '--dir', mgmt, '--ttl', '10m'], 120_000);
    expect(run.exitCode, run.stderr).toBe(0);
    const [line, expiry] = run.stdout.split('\n');
    const parsed = /^PROVISIONER_AGENT_TOKEN=(\S+) provisioner-agent register --server (https:\/\/\S+) --ca-checksum ([0-9a-f]{64})$/.exec(line ?? '');
    expect(parsed, run.stdout).not.toBeNull();
    expect(expiry).toMatch(/^# one host only; the token expires at \d{4}-\d\d-\d\dT/);
    const [, token, server, checksum] = parsed!;
    expect(await readFile(path.join(mgmt, 'logs', 'provisioner.log'), 'utf8')).not.toContain(token!);

    const register = await execa(agentBinary, ['register', '--server', server!, '--ca-checksum', checksum!, '--data-dir', hostDir, '--host-name', host], {
      env: { PROVISIONER_AGENT_TOKEN: token! },
      reject: false,
      timeout: 120_000,
    });
    expect(register.exitCode, register.stderr).toBe(0);
    expect((await stat(path.join(hostDir, 'credential.json'))).mode & 0o777).toBe(0o600);

    agent = execa(agentBinary, ['run', '--data-dir', hostDir, '--lock-file', path.join(hostDir, 'plan.lock')], { reject: false });
    const list = await cli(['hosts', 'list', '--dir', mgmt], 60_000);
    expect(list.exitCode, list.stderr).toBe(0);
    expect(list.stdout).toMatch(new RegExp(`^${host}\\s+\\S+\\s+Registered\\s`, 'm'));
  });

  it('management start runs the agent manager', start, commandTimeoutMs);

  it('registration-command prints a line the agent registers with; the token stays out of the debug log', register, commandTimeoutMs + 300_000);

  it('plan apply: the agent writes the file and runs the instruction, and the plan is Applied', async () => {
    await register();
    const written = path.join(hostDir, 'written.txt');
    const touched = path.join(hostDir, 'touched');
    const planFile = path.join(mgmt, 'plan.yaml');
    await writeFile(planFile, [
      'apiVersion: agent.provisioner.dev/v1alpha1',
      'kind: NodePlan',
      `metadata: { name: hello, labels: { agent.provisioner.dev/host: ${host} } }`,
      'spec:',
      `  files: [{ path: ${written}, content: "from a plan\\n", mode: "0640" }]`,
      `  instructions: [{ name: touch, command: /usr/bin/touch, args: [${touched}] }]`,
      '',
    ].join('\n'));
    const apply = await cli(['plan', 'apply', '--dir', mgmt, '-f', planFile], 60_000);
    expect(apply.exitCode, apply.stderr).toBe(0);
    await waitFor('plan hello Applied', async () => (await planPhase('hello')) === 'Applied', 120_000);
    expect(await readFile(written, 'utf8')).toBe('from a plan\n');
    expect((await stat(written)).mode & 0o777).toBe(0o640);
    await stat(touched);
  }, commandTimeoutMs + 600_000);

  it('plan cancel stops a running plan, which ends Cancelled', async () => {
    await register();
    const planFile = path.join(mgmt, 'long.yaml');
    await writeFile(planFile, [
      'apiVersion: agent.provisioner.dev/v1alpha1',
      'kind: NodePlan',
      `metadata: { name: long, labels: { agent.provisioner.dev/host: ${host} } }`,
      'spec:',
      '  instructions: [{ name: wait, command: /bin/sleep, args: ["600"] }]',
      '',
    ].join('\n'));
    expect((await cli(['plan', 'apply', '--dir', mgmt, '-f', planFile], 60_000)).exitCode).toBe(0);
    await waitFor('plan long Executing', async () => (await planPhase('long')) === 'Executing', 120_000);
    const cancel = await cli(['plan', 'cancel', '--dir', mgmt, '--host', host, 'long'], 60_000);
    expect(cancel.exitCode, cancel.stderr).toBe(0);
    await waitFor('plan long Cancelled', async () => (await planPhase('long')) === 'Cancelled', 120_000);
  }, commandTimeoutMs + 600_000);
});

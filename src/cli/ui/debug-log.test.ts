import { mkdtemp, readFile, readdir, rm, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import * as tar from 'tar';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ConfigError } from '../../errors.js';
import { buildProgram } from '../program.js';
import { DebugLog, debugLogPath, withDebugLog } from './debug-log.js';
import { createRenderer } from './index.js';

let dir: string;
let out: string;
let err: string;
const stdinTTY = process.stdin.isTTY;

async function cli(...args: string[]): Promise<void> {
  const program = buildProgram({
    stdout: { write: (s: string) => (out += s) },
    stderr: { write: (s: string) => (err += s) },
    signal: new AbortController().signal,
    onRenderer: () => {},
  });
  program.exitOverride();
  await program.parseAsync(['node', 'provisioner', ...args]);
}

interface Line {
  time: string;
  pid: number;
  type: string;
  level?: string;
  message?: string;
  errorClass?: string;
  stack?: string;
}

async function debugLines(): Promise<Line[]> {
  return (await readFile(debugLogPath(dir), 'utf8'))
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line) as Line);
}

beforeEach(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'provisioner-debug-log-'));
  out = '';
  err = '';
  Object.defineProperty(process.stdin, 'isTTY', { value: false, configurable: true });
});
afterEach(async () => {
  Object.defineProperty(process.stdin, 'isTTY', { value: stdinTTY, configurable: true });
  await rm(dir, { recursive: true, force: true });
});

describe('the debug log', () => {
  it('gets every event at debug level while the terminal shows info and above', async () => {
    const terminal = await createRenderer({ output: 'text', logLevel: 'info', stdout: { write: (s: string) => (out += s) }, stderr: { write: (s: string) => (err += s) } });
    const sink = withDebugLog(terminal, DebugLog.open(dir, 'test'));
    sink.emit({ type: 'log', level: 'debug', message: 'a detail for the log only', fields: { attempt: 2 } });
    sink.emit({ type: 'log', level: 'info', message: 'news for everyone' });
    sink.emit({ type: 'progress', task: 'extract:etcd', label: 'Extracting etcd', current: 10, total: 100, unit: 'bytes' });
    await sink.close();

    expect(err).toContain('news for everyone');
    expect(err).not.toContain('a detail for the log only');
    const lines = await debugLines();
    expect(lines.map((l) => l.message ?? l.type)).toEqual(['provisioner test started', 'a detail for the log only', 'news for everyone', 'progress']);
    expect(lines[1]).toMatchObject({ type: 'log', level: 'debug', pid: process.pid, fields: { attempt: 2 } });
    expect(Date.parse(lines[1]!.time)).not.toBeNaN();
    // The process logs' directory stays private, whoever creates it first.
    expect((await stat(path.dirname(debugLogPath(dir)))).mode & 0o777).toBe(0o700);
  });

  it('withholds a result that carries a credential, which the terminal still shows', async () => {
    const terminal = await createRenderer({ output: 'text', logLevel: 'info', stdout: { write: (s: string) => (out += s) }, stderr: { write: (s: string) => (err += s) } });
    const sink = withDebugLog(terminal, DebugLog.open(dir, 'test'));
    sink.emit({ type: 'result', kind: 'registration-command', text: 'PROVISIONER_AGENT_TOKEN=token-value provisioner-agent register', data: { token: 'token-value' }, secret: true });
    await sink.close();

    expect(out).toContain('token-value');
    const text = await readFile(debugLogPath(dir), 'utf8');
    expect(text).toContain('registration-command');
    expect(text).not.toContain('token-value');
  });

  it('is written by every command with an install directory, failures included, and only into a directory that exists', async () => {
    await cli('create', 'install-config', '--dir', dir, '--name', 'demo');
    err = '';
    await cli('--log-level', 'error', 'create', 'manifests', '--dir', dir);
    expect(err).toBe('');
    await writeFile(path.join(dir, 'install-config.yaml'), 'metadata: [\n');
    await expect(cli('create', 'manifests', '--dir', dir)).rejects.toBeInstanceOf(ConfigError);

    const lines = await debugLines();
    const starts = lines.filter((l) => /^provisioner .* started$/.test(l.message ?? '')).map((l) => l.message);
    expect(starts).toEqual(['provisioner create install-config started', 'provisioner create manifests started', 'provisioner create manifests started']);
    // The second run's result reached the log although --log-level error showed nothing.
    expect(lines.some((l) => l.type === 'result')).toBe(true);
    expect(lines.at(-1)).toMatchObject({ type: 'error', errorClass: 'config', message: `${path.join(dir, 'install-config.yaml')} is not valid YAML` });

    const missing = path.join(dir, 'not-yet');
    await expect(cli('gather', 'bootstrap', '--dir', missing)).rejects.toThrow(/is not a directory/);
    await expect(stat(missing)).rejects.toThrow(/ENOENT/);
  });

  it('is in the gather bundle, redacted like every other file', async () => {
    const secret = 'hunter2-not-a-real-password-7f3a';
    const token = 'eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ0ZXN0In0.c2lnbmF0dXJlLW5vdC1yZWFs';
    const log = DebugLog.open(dir, 'test')!;
    log.emit({ type: 'log', level: 'debug', message: `calling the API with Authorization: Bearer ${token}`, fields: { password: secret } });
    log.close();

    const bundle = path.join(dir, 'bundle.tar.gz');
    await cli('gather', 'bootstrap', '--dir', dir, '--output-file', bundle);

    const files = new Map<string, string>();
    await tar.t({
      file: bundle,
      onReadEntry: (entry) => {
        let text = '';
        entry.on('data', (chunk: Buffer) => (text += chunk.toString('utf8')));
        entry.on('end', () => files.set(entry.path.replace(/^[^/]+\//, ''), text));
      },
    });
    const bundled = files.get('logs/provisioner.log');
    expect(bundled).toContain('calling the API with Authorization: [REDACTED]');
    // The gather's own events are in it too.
    expect(bundled).toContain('provisioner gather bootstrap started');
    for (const [name, text] of files) {
      expect({ name, secret: text.includes(secret) }).toEqual({ name, secret: false });
      expect({ name, token: text.includes(token) }).toEqual({ name, token: false });
    }
    expect(files.get('README.txt')).toMatch(/logs\/provisioner\.log\[\.1\] +the CLI's debug log/);
    expect(await readdir(path.join(dir, 'logs'))).toEqual(['provisioner.log']);
  });
});

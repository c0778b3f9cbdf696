/**
 * The bundled CNCF distribution registry (test-only binary `registry`, embedded/modules/distribution)
 * on 127.0.0.1 at a port it picks itself (`http.addr: 127.0.0.1:0`; the port is read from its
 * "listening on" line), storing in a directory of the test's. With `htpasswd`, it requires Basic
 * credentials: the file is absent, so the registry writes it with the user `docker` and a random
 * password, which it logs, and the test reads from there. A missing binary fails (ensureBinaries
 * throws), never skips.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { ensureBinaries } from '../../../src/embedded/cache.js';
import { waitFor } from './controlplane.js';

export interface OciRegistry {
  /** `127.0.0.1:<port>`. */
  host: string;
  /** The htpasswd user's credentials, when started with `htpasswd`. */
  credentials?: { username: string; password: string };
  /** What it logged so far (its access log names every request). */
  log(): string;
  stop(): Promise<void>;
}

export async function startOciRegistry(dir: string, options: { htpasswd?: boolean } = {}): Promise<OciRegistry> {
  const { registry } = await ensureBinaries(['registry']);
  await mkdir(dir, { recursive: true });
  const config = path.join(dir, 'config.yml');
  await writeFile(config, [
    'version: 0.1',
    'log:',
    '  level: info',
    '  formatter: text',
    'storage:',
    '  filesystem:',
    `    rootdirectory: ${path.join(dir, 'storage')}`,
    'http:',
    '  addr: 127.0.0.1:0',
    '  secret: provisioner-test-upload-secret',
    ...(options.htpasswd ? ['auth:', '  htpasswd:', '    realm: provisioner-test', `    path: ${path.join(dir, 'htpasswd')}`] : []),
    '',
  ].join('\n'));
  const child: ChildProcess = spawn(registry!, ['serve', config], { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const stop = async (): Promise<void> => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
    await exited;
    clearTimeout(timer);
  };
  try {
    const port = await waitFor('the registry to listen', () => {
      if (child.exitCode !== null) throw new Error(`the registry exited ${child.exitCode}:\n${output}`);
      return /listening on 127\.0\.0\.1:(\d+)/.exec(output)?.[1];
    }, 30_000);
    const password = options.htpasswd ? /password="?([A-Za-z0-9_-]+)"?/.exec(output)?.[1] : undefined;
    if (options.htpasswd && !password) throw new Error(`the registry logged no provisioned password:\n${output}`);
    return { host: `127.0.0.1:${port}`, ...(password ? { credentials: { username: 'docker', password } } : {}), log: () => output, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}

/**
 * A private npm registry for end-to-end tests: Verdaccio (a devDependency) on a free
 * loopback port, with no uplink (nothing is ever fetched from or sent to a public
 * registry), storage in a temp directory, and a body size limit our binary packages fit.
 * Publishing uses a user created through the registry's own login endpoint.
 *
 * With no uplink, `provisioner`'s own dependencies must be in the registry too:
 * `seedDependencies` packs the exact versions package-lock.json records for them (from
 * the local npm cache) and publishes each, as a private mirror would hold them.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdir, readdir, readFile, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import path from 'node:path';
import { execa } from 'execa';
import { list as listTar } from 'tar';
import { packageRoot } from '../../../src/embedded/catalog.js';

export interface LocalRegistry {
  url: string;
  /** An npmrc naming the registry and holding the publishing user's token. */
  userconfig: string;
  /** Publishes a packed tarball with `npm publish`; throws with npm's output on failure. */
  publish(tarball: string): Promise<void>;
  /** Puts a third-party tarball into the registry as `npm publish` would, without npm's checks; returns `name@version`. */
  mirror(tarball: string): Promise<string>;
  /** The registry's log so far (for failure messages). */
  log(): string;
  stop(): Promise<void>;
}

/** Largest request the registry accepts: above our largest package tarball (about 30 MiB), with room. */
const maxBodySize = '200mb';

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => (typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port'))));
    });
  });
}

export async function startRegistry(dir: string): Promise<LocalRegistry> {
  await mkdir(dir, { recursive: true });
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const config = path.join(dir, 'config.yaml');
  await writeFile(
    config,
    [
      `storage: ${path.join(dir, 'storage')}`,
      'auth:',
      '  htpasswd:',
      `    file: ${path.join(dir, 'htpasswd')}`,
      // The publishing user's password hash. The default, bcrypt in JavaScript, costs 0.1-0.2 s of CPU on every
      // authenticated request (the legacy token carries the password), 160 of them per seeding; sha1 is enough for
      // a throwaway loopback registry with a throwaway user.
      '    algorithm: sha1',
      // No `uplinks:` section: packages this registry does not hold are 404, never proxied.
      'packages:',
      "  '**':",
      '    access: $all',
      '    publish: $authenticated',
      `max_body_size: ${maxBodySize}`,
      'web:',
      '  enable: false',
      'log: { type: stdout, format: pretty, level: warn }',
      '',
    ].join('\n'),
  );
  const child: ChildProcess = spawn(path.join(packageRoot, 'node_modules', '.bin', 'verdaccio'), ['--config', config, '--listen', `127.0.0.1:${port}`], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGTERM');
    await exited;
  };

  const deadline = Date.now() + 60_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`verdaccio exited with ${child.exitCode}:\n${output}`);
    const ok = await fetch(`${url}/-/ping`).then((r) => r.ok, () => false);
    if (ok) break;
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`verdaccio did not answer on ${url} within 60 s:\n${output}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 250));
  }

  // Create the publishing user (the endpoint `npm adduser` uses) and keep its token.
  const user = { name: 'e2e', password: 'e2e-local-registry-only' };
  const login = await fetch(`${url}/-/user/org.couchdb.user:${user.name}`, {
    method: 'PUT',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ _id: `org.couchdb.user:${user.name}`, ...user, type: 'user', roles: [], date: new Date().toISOString() }),
  });
  const { token } = (await login.json()) as { token?: string };
  if (!login.ok || !token) {
    await stop();
    throw new Error(`creating the publishing user on ${url} failed: HTTP ${login.status}\n${output}`);
  }
  const userconfig = path.join(dir, 'npmrc');
  await writeFile(userconfig, `registry=${url}/\n//127.0.0.1:${port}/:_authToken=${token}\n`, { mode: 0o600 });

  const mirror = async (tarball: string): Promise<string> => {
    const data = await readFile(tarball);
    const manifest = await readTarballManifest(tarball);
    const { name, version } = manifest as { name: string; version: string };
    const file = `${name}-${version}.tgz`;
    const document = {
      _id: name,
      name,
      'dist-tags': { latest: version },
      versions: {
        [version]: {
          ...manifest,
          _id: `${name}@${version}`,
          dist: {
            shasum: createHash('sha1').update(data).digest('hex'),
            integrity: `sha512-${createHash('sha512').update(data).digest('base64')}`,
            tarball: `${url}/${name}/-/${path.posix.basename(file)}`,
          },
        },
      },
      _attachments: { [file]: { content_type: 'application/octet-stream', data: data.toString('base64'), length: data.length } },
    };
    const response = await fetch(`${url}/${name.replace('/', '%2f')}`, {
      method: 'PUT',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
      body: JSON.stringify(document),
    });
    if (!response.ok) throw new Error(`mirroring ${name}@${version} into ${url} failed: HTTP ${response.status} ${await response.text()}`);
    return `${name}@${version}`;
  };

  return {
    url,
    userconfig,
    mirror,
    log: () => output,
    stop,
    publish: async (tarball) => {
      const run = await execa('npm', ['publish', tarball, '--registry', `${url}/`, '--userconfig', userconfig, '--access', 'public', '--ignore-scripts'], {
        reject: false,
        all: true,
        env: { npm_config_cache: path.join(dir, 'npm-cache') },
      });
      if (run.exitCode !== 0) throw new Error(`npm publish ${path.basename(tarball)} exited ${run.exitCode}:\n${run.all}\nregistry log:\n${output}`);
    },
  };
}

/** The package.json inside a package tarball (npm puts it at `package/package.json`; a few old packages use another top directory). */
async function readTarballManifest(tarball: string): Promise<Record<string, unknown>> {
  let text: string | undefined;
  await listTar({
    file: tarball,
    onReadEntry: (entry) => {
      if (text === undefined && /^[^/]+\/package\.json$/.test(entry.path)) {
        const chunks: Buffer[] = [];
        entry.on('data', (chunk: Buffer) => chunks.push(chunk));
        entry.on('end', () => (text = Buffer.concat(chunks).toString('utf8')));
      } else {
        entry.resume();
      }
    },
  });
  if (text === undefined) throw new Error(`${tarball} holds no package.json`);
  return JSON.parse(text) as Record<string, unknown>;
}

/**
 * Publishes into `registry` every package (exact version) of provisioner's runtime
 * dependency tree as package-lock.json records it, packed from the local npm cache
 * (the network only for what the cache lacks). Versions of one package go in ascending
 * order, so `latest` ends on the highest. Returns how many were published.
 */
export async function seedDependencies(registry: LocalRegistry, dir: string): Promise<number> {
  const lock = JSON.parse(await readFile(path.join(packageRoot, 'package-lock.json'), 'utf8')) as {
    packages: Record<string, { version?: string; dev?: boolean; link?: boolean; name?: string }>;
  };
  const specs = new Set<string>();
  for (const [where, entry] of Object.entries(lock.packages)) {
    if (where === '' || entry.dev || entry.link || !entry.version) continue;
    const name = entry.name ?? where.slice(where.lastIndexOf('node_modules/') + 'node_modules/'.length);
    specs.add(`${name}@${entry.version}`);
  }
  const packed = path.join(dir, 'dependencies');
  await mkdir(packed, { recursive: true });
  const pack = await execa('npm', ['pack', ...[...specs].sort(), '--prefer-offline', '--ignore-scripts', '--pack-destination', packed, '--json'], {
    cwd: packed,
    reject: false,
    all: true,
  });
  if (pack.exitCode !== 0) throw new Error(`npm pack of provisioner's dependencies exited ${pack.exitCode}:\n${pack.all}`);
  const tarballs = (await readdir(packed)).filter((f) => f.endsWith('.tgz'));
  const ordered = tarballs.map((f) => ({ file: path.join(packed, f), key: f.replace(/\.tgz$/, '') })).sort((a, b) => a.key.localeCompare(b.key, 'en', { numeric: true }));
  for (const { file } of ordered) await registry.mirror(file);
  return ordered.length;
}

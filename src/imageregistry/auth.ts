/**
 * Registry credentials, from a file only (never a flag or a variable's value, which land in
 * shell histories and process lists): a Docker `config.json` (what `docker login` and
 * `podman login --authfile` write) whose `auths` has an entry for the registry's host, with
 * `auth` (base64 of `user:password`) or `username` and `password`. Messages name the file and
 * the host, never a value.
 */
import { stat } from 'node:fs/promises';
import { ConfigError, requestField } from '../errors.js';
import { readJsonFile, type FileKind } from '../input-files.js';

export interface RegistryCredentials {
  username: string;
  password: string;
}

const authFileKind: FileKind = {
  name: 'registry auth file',
  maxBytes: 1024 * 1024,
  writer: 'user',
  hint: (file) => `write ${file} as a Docker config.json: {"auths": {"<host[:port]>": {"auth": "<base64 of user:password>"}}} (docker login writes one), mode 0600`,
};

/** The host key of an `auths` entry: `host[:port]` without a scheme or path (`https://host:5000/v1/` → `host:5000`). */
function authsKey(key: string): string {
  return key.replace(/^[a-z]+:\/\//i, '').replace(/\/.*$/, '').toLowerCase();
}

/**
 * The credentials for `host` (`host[:port]`) in `file`, and warnings (a file others may read).
 * A ConfigError names the file and the host when the file cannot be read or has no usable entry.
 */
export async function readRegistryAuth(file: string, host: string): Promise<{ credentials: RegistryCredentials; warnings: string[] }> {
  const fail = (message: string, hint: string): never => {
    throw new ConfigError(`The registry auth file (${requestField('imageRegistryAuthFile')}) cannot be used: ${message}`, [], { hint });
  };
  const warnings: string[] = [];
  const info = await stat(file).catch(() => undefined);
  if (!info?.isFile()) fail(`${file} does not exist or is not a file`, authFileKind.hint(file));
  if ((info!.mode & 0o077) !== 0) warnings.push(`${file} is readable by other users (mode ${(info!.mode & 0o777).toString(8)}): run chmod 600 ${file}`);
  const document = await readJsonFile(file, authFileKind);
  const auths = typeof document === 'object' && document !== null ? (document as { auths?: unknown }).auths : undefined;
  const entries = typeof auths === 'object' && auths !== null ? Object.entries(auths as Record<string, unknown>) : [];
  const entry = entries.find(([key]) => authsKey(key) === host.toLowerCase())?.[1];
  if (typeof entry !== 'object' || entry === null) {
    const helper = typeof document === 'object' && document !== null && ('credsStore' in document || 'credHelpers' in document);
    fail(
      `${file} has no auths entry for ${host}${entries.length ? ` (it has: ${entries.map(([key]) => authsKey(key)).join(', ')})` : ''}`,
      helper
        ? `its credentials live in a credential helper (credsStore/credHelpers), which provisioner does not run: write an auths entry for ${host} with "auth" (base64 of user:password) into a file of its own`
        : `add "${host}": {"auth": "<base64 of user:password>"} under auths (docker login ${host} writes it)`,
    );
  }
  const fields = entry as Record<string, unknown>;
  if (typeof fields.auth === 'string' && fields.auth !== '') {
    const decoded = Buffer.from(fields.auth, 'base64').toString('utf8');
    const colon = decoded.indexOf(':');
    if (colon <= 0) fail(`the auths entry for ${host} in ${file} has an "auth" that is not base64 of user:password`, `write it as the output of: printf '%s' 'user:password' | base64`);
    return { credentials: { username: decoded.slice(0, colon), password: decoded.slice(colon + 1) }, warnings };
  }
  if (typeof fields.username === 'string' && fields.username !== '' && typeof fields.password === 'string') {
    return { credentials: { username: fields.username, password: fields.password }, warnings };
  }
  return fail(`the auths entry for ${host} in ${file} has neither "auth" nor "username" and "password"`, `give "auth" (base64 of user:password); identity tokens are not supported`);
}

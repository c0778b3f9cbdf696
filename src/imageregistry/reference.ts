/**
 * The registry a user names for images (`host[:port][/path]`, e.g. `registry.example:5000/team`):
 * where the OCI distribution API is reached and how images are named under it. Plain HTTP only
 * for a loopback registry (127.0.0.0/8, ::1, localhost), HTTPS for every other; an explicit
 * `https://` is accepted for any, `http://` for loopback only.
 */
import { isLoopbackUrl } from '../agent/registration.js';
import { UsageError, requestField } from '../errors.js';

export interface RegistryTarget {
  /** What the user wrote, without a scheme, e.g. `127.0.0.1:5000/provisioner`. */
  text: string;
  /** `host[:port]` as images name it, e.g. `registry.example:5000`, `[::1]:5000`. */
  host: string;
  /** Repository path prefix without slashes at the ends, e.g. `team/provisioner`; empty for none. */
  path: string;
  scheme: 'http' | 'https';
  /** A loopback address or `localhost`. */
  loopback: boolean;
}

/** A path component of a repository name, as the distribution spec's grammar has it. */
const pathComponent = /^[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*$/;
const hostname = /^(?=.{1,253}$)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$/;
const ipv4 = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/;

/** Parses `text` (the `imageRegistry` request field); a UsageError names the field, what is wrong and an example. */
export function parseImageRegistry(text: string): RegistryTarget {
  const fail = (why: string): never => {
    throw new UsageError(`${requestField('imageRegistry')} ${JSON.stringify(text)}: ${why}`, {
      hint: `Name the registry as host[:port][/path], e.g. registry.example.com/provisioner or 127.0.0.1:5000/provisioner (plain HTTP for a loopback registry only).`,
    });
  };
  let rest = text.trim();
  let scheme: RegistryTarget['scheme'] | undefined;
  const schemeMatch = /^([a-z]+):\/\//i.exec(rest);
  if (schemeMatch) {
    const written = schemeMatch[1]!.toLowerCase();
    if (written !== 'http' && written !== 'https') fail(`the scheme ${written}:// is not one a registry speaks (https://, or http:// for a loopback registry)`);
    scheme = written as RegistryTarget['scheme'];
    rest = rest.slice(schemeMatch[0].length);
  }
  rest = rest.replace(/\/+$/, '');
  const slash = rest.indexOf('/');
  const host = slash === -1 ? rest : rest.slice(0, slash);
  const repositoryPath = slash === -1 ? '' : rest.slice(slash + 1);
  if (host === '') fail('it names no host');
  const hostMatch = /^(\[[0-9A-Fa-f:.]+\]|[^:[\]]+)(?::(\d{1,5}))?$/.exec(host);
  if (!hostMatch) fail(`${host} is not host[:port]`);
  const name = hostMatch![1]!;
  const port = hostMatch![2];
  if (port !== undefined && (Number(port) < 1 || Number(port) > 65535)) fail(`port ${port} is not between 1 and 65535`);
  const bracketed = name.startsWith('[');
  const v4 = ipv4.exec(name);
  if (v4 && v4.slice(1).some((octet) => Number(octet) > 255)) fail(`${name} is not an IPv4 address`);
  if (!bracketed && !v4 && !hostname.test(name)) fail(`${name} is not a host name`);
  // Without a dot, a port or `localhost`, image references read the first component as a Docker Hub account, not a registry.
  if (!bracketed && !v4 && port === undefined && !name.includes('.') && name !== 'localhost') {
    fail(`${name} would be read as a Docker Hub account, not a registry host: write its full name (with a dot) or add its port`);
  }
  for (const component of repositoryPath === '' ? [] : repositoryPath.split('/')) {
    if (!pathComponent.test(component)) fail(`the path component ${JSON.stringify(component)} is not a repository name (lower-case letters and digits, separated by ., _, __ or -)`);
  }
  const loopback = isLoopbackUrl(`http://${name}`);
  if (scheme === 'http' && !loopback) fail('plain http:// is accepted for a loopback registry only; registries elsewhere are reached over HTTPS (give a private CA with the CA file option)');
  return { text: `${host}${repositoryPath ? `/${repositoryPath}` : ''}`, host, path: repositoryPath, scheme: scheme ?? (loopback ? 'http' : 'https'), loopback };
}

/** The repository of image `name` under the target, e.g. `provisioner/capi-manager`. */
export function targetRepository(target: RegistryTarget, name: string): string {
  return target.path ? `${target.path}/${name}` : name;
}

/** The image reference under the target: `host[:port]/<path>/<name>:<tag>`, pinned `@<digest>` when given. */
export function targetImageRef(target: RegistryTarget, name: string, tag: string, digest?: string): string {
  return `${target.host}/${targetRepository(target, name)}:${tag}${digest ? `@${digest}` : ''}`;
}

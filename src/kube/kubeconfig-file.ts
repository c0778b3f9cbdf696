/**
 * Reading kubeconfigs without the client library: the cluster of the current context and,
 * when they need no plugin, its user's credentials (what `KubeClient` uses); and the check of
 * a kubeconfig the user names by flag (`--management-kubeconfig`, `--pivot-to`,
 * `--to-kubeconfig`) before anything starts, since a file that is no kubeconfig at all would
 * otherwise only fail later, far from the flag. A file that cannot serve is a ConfigError
 * naming the flag, the file and the field; a missing one is a UsageError.
 */
import path from 'node:path';
import { UsageError, type FieldProblem } from '../errors.js';
import { invalidInput, readInputText, parseYamlDocument, type FileKind } from '../input-files.js';

/** A kubeconfig given by `flag`: at most 4 MiB (certificates inline; real ones are a few KiB), the user's file. */
function kubeconfigFile(flag: string): FileKind {
  return {
    name: 'kubeconfig',
    maxBytes: 4 * 1024 * 1024,
    writer: 'user',
    hint: () => `pass a kubeconfig whose current context reaches the cluster with ${flag} (\`kubectl config view --minify --flatten\` writes one)`,
  };
}

type Named = { name?: unknown } & Record<string, unknown>;

function entries(value: unknown): Named[] {
  return Array.isArray(value) ? value.filter((e): e is Named => typeof e === 'object' && e !== null) : [];
}

/** The current context's `context` and the `cluster` and `user` it names; each undefined when missing. */
function currentEntries(config: Record<string, unknown>): { context?: Record<string, unknown>; cluster?: unknown; user?: unknown } {
  const context = entries(config['contexts']).find((c) => c.name === config['current-context'])?.['context'] as Record<string, unknown> | undefined;
  return {
    ...(context ? { context } : {}),
    cluster: entries(config['clusters']).find((c) => c.name === context?.['cluster'])?.['cluster'],
    user: entries(config['users']).find((u) => u.name === context?.['user'])?.['user'],
  };
}

/** The cluster a kubeconfig's current context names: where a client connects and the CA it trusts. */
export interface KubeconfigCluster {
  /** The cluster entry's name. */
  name: string;
  /** The API server's URL. */
  server: string;
  /** certificate-authority-data (base64 PEM), when given inline. */
  caData?: string;
  /** certificate-authority, a file (relative paths resolved against the kubeconfig's directory). */
  caFile?: string;
}

/**
 * The cluster of a parsed kubeconfig's current context (current-context, then that context's
 * cluster, then that cluster's server), the way kubectl and the client library resolve it; or
 * the field that stops a client from using the file. `dir` is the kubeconfig's directory, for a
 * relative certificate-authority; undefined for kubeconfig text that never was a file.
 */
export function currentCluster(document: unknown, dir?: string): KubeconfigCluster | FieldProblem {
  const problem = (path: string, message: string): FieldProblem => ({ path, message });
  if (typeof document !== 'object' || document === null || Array.isArray(document)) {
    return problem('(document)', 'expected a mapping with clusters, contexts, users and current-context');
  }
  const config = document as Record<string, unknown>;
  const current = config['current-context'];
  if (typeof current !== 'string' || current === '') return problem('current-context', 'missing: the kubeconfig names no context to use');
  const { context, cluster: entry } = currentEntries(config);
  const clusterName = context?.['cluster'];
  if (typeof clusterName !== 'string') return problem('contexts', `no context named "${current}" with a cluster`);
  const cluster = entry as Record<string, unknown> | undefined;
  const server = cluster?.['server'];
  if (typeof server !== 'string' || server === '') return problem('clusters', `no cluster named "${clusterName}" with a server`);
  const caData = cluster?.['certificate-authority-data'];
  const caFile = cluster?.['certificate-authority'];
  return {
    name: clusterName,
    server,
    ...(typeof caData === 'string' && caData !== '' ? { caData } : {}),
    ...(typeof caFile === 'string' && caFile !== '' ? { caFile: dir === undefined ? caFile : path.resolve(dir, caFile) } : {}),
  };
}

/**
 * A kubeconfig user's credentials that need no plugin, and the cluster's TLS settings: files
 * are paths (relative ones resolved against the kubeconfig's directory), data is base64 as in
 * the file. Read at each request, as the client library reads them, so a rotated file counts.
 */
export interface StaticCredentials {
  caFile?: string;
  caData?: string;
  certFile?: string;
  certData?: string;
  keyFile?: string;
  keyData?: string;
  token?: string;
  tokenFile?: string;
  /** insecure-skip-tls-verify. */
  insecure?: boolean;
  /** tls-server-name: the name the serving certificate is checked against instead of the server's host. */
  serverName?: string;
}

/** The user and cluster fields `staticCredentials` reads; a kubeconfig using any other (exec, auth-provider, username, as, proxy-url...) needs the client library. */
const staticUserFields: Readonly<Record<string, keyof StaticCredentials>> = {
  'client-certificate': 'certFile',
  'client-certificate-data': 'certData',
  'client-key': 'keyFile',
  'client-key-data': 'keyData',
  token: 'token',
  'token-file': 'tokenFile',
};
const staticClusterFields: Readonly<Record<string, keyof StaticCredentials>> = {
  'certificate-authority': 'caFile',
  'certificate-authority-data': 'caData',
  'tls-server-name': 'serverName',
};
const fileFields: ReadonlySet<keyof StaticCredentials> = new Set(['caFile', 'certFile', 'keyFile', 'tokenFile']);

/**
 * The current context's credentials when they are certificates, a token or a token file (what
 * this tool writes, and what kind, k3s and Cluster API write); undefined when the user runs a
 * plugin or names anything else, which the client library handles.
 */
export function staticCredentials(document: unknown, dir?: string): StaticCredentials | undefined {
  if (typeof document !== 'object' || document === null) return undefined;
  const { user, cluster } = currentEntries(document as Record<string, unknown>);
  if (typeof user !== 'object' || user === null || typeof cluster !== 'object' || cluster === null) return undefined;
  const credentials: StaticCredentials = {};
  const copy = (fields: Readonly<Record<string, keyof StaticCredentials>>, from: Record<string, unknown>, ignored: readonly string[]): boolean => {
    for (const [field, value] of Object.entries(from)) {
      if (ignored.includes(field) || value === undefined || value === null || value === '') continue;
      const key = fields[field];
      if (key === undefined || typeof value !== 'string') return false;
      (credentials as Record<string, string>)[key] = fileFields.has(key) && dir !== undefined ? path.resolve(dir, value) : value;
    }
    return true;
  };
  const clusterFields = cluster as Record<string, unknown>;
  // extensions carry tools' notes (minikube's provenance), no credentials: the library ignores them too.
  if (!copy(staticUserFields, user as Record<string, unknown>, ['extensions']) || !copy(staticClusterFields, clusterFields, ['server', 'insecure-skip-tls-verify', 'extensions'])) return undefined;
  const insecure = clusterFields['insecure-skip-tls-verify'];
  if (insecure !== undefined && typeof insecure !== 'boolean') return undefined;
  if (insecure === true) credentials.insecure = true;
  return credentials;
}

/**
 * Checks that `file` is a kubeconfig whose current context names a cluster with a server
 * (what a client needs), without connecting. Throws a UsageError when it does not exist,
 * a ConfigError otherwise.
 */
export async function checkKubeconfigFile(file: string, flag: string): Promise<void> {
  const kind = kubeconfigFile(flag);
  const text = await readInputText(file, kind);
  if (text === undefined) throw new UsageError(`${file} (given by ${flag}) does not exist`, { hint: kind.hint(file) });
  const cluster = currentCluster(parseYamlDocument(text, file, kind).value);
  if ('path' in cluster) throw invalidInput(file, kind, [cluster]);
}

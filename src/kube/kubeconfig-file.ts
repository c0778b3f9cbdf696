/**
 * Kubeconfigs the user names by flag (`--management-kubeconfig`, `--pivot-to`,
 * `--to-kubeconfig`), checked before anything starts: the client library takes a file
 * that is no kubeconfig at all for one with no clusters, which only fails later, far from
 * the flag. A file that cannot serve is a ConfigError naming the flag, the file and the
 * field; a missing one is a UsageError.
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
  const context = entries(config['contexts']).find((c) => c.name === current);
  const clusterName = (context?.['context'] as { cluster?: unknown } | undefined)?.cluster;
  if (!context || typeof clusterName !== 'string') return problem('contexts', `no context named "${current}" with a cluster`);
  const cluster = entries(config['clusters']).find((c) => c.name === clusterName)?.['cluster'] as Record<string, unknown> | undefined;
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

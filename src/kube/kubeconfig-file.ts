/**
 * Kubeconfigs the user names by flag (`--management-kubeconfig`, `--pivot-to`,
 * `--to-kubeconfig`), checked before anything starts: the client library takes a file
 * that is no kubeconfig at all for one with no clusters, which only fails later, far from
 * the flag. A file that cannot serve is a ConfigError naming the flag, the file and the
 * field; a missing one is a UsageError.
 */
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

/**
 * Checks that `file` is a kubeconfig whose current context names a cluster with a server
 * (what a client needs), without connecting. Throws a UsageError when it does not exist,
 * a ConfigError otherwise.
 */
export async function checkKubeconfigFile(file: string, flag: string): Promise<void> {
  const kind = kubeconfigFile(flag);
  const text = await readInputText(file, kind);
  if (text === undefined) throw new UsageError(`${file} (given by ${flag}) does not exist`, { hint: kind.hint(file) });
  const document = parseYamlDocument(text, file, kind).value;
  const problem = (path: string, message: string): FieldProblem => ({ path, message });
  if (typeof document !== 'object' || document === null || Array.isArray(document)) {
    throw invalidInput(file, kind, [problem('(document)', 'expected a mapping with clusters, contexts, users and current-context')]);
  }
  const config = document as Record<string, unknown>;
  const current = config['current-context'];
  if (typeof current !== 'string' || current === '') throw invalidInput(file, kind, [problem('current-context', 'missing: the kubeconfig names no context to use')]);
  const context = entries(config['contexts']).find((c) => c.name === current);
  const clusterName = (context?.['context'] as { cluster?: unknown } | undefined)?.cluster;
  if (!context || typeof clusterName !== 'string') throw invalidInput(file, kind, [problem('contexts', `no context named "${current}" with a cluster`)]);
  const cluster = entries(config['clusters']).find((c) => c.name === clusterName);
  const server = (cluster?.['cluster'] as { server?: unknown } | undefined)?.server;
  if (typeof server !== 'string' || server === '') throw invalidInput(file, kind, [problem('clusters', `no cluster named "${clusterName}" with a server`)]);
}

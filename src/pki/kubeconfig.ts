/**
 * Kubeconfig files for a client certificate: credentials embedded as base64 data, so the file
 * stands alone; written 0600 and atomically. Rendered with `yaml`, not the Kubernetes client
 * (only src/kube imports that).
 */
import { stringify } from 'yaml';
import { writeFileAtomic } from '../files.js';
import { privateFileMode } from './files.js';

export interface KubeconfigOptions {
  /** API server URL, e.g. `https://127.0.0.1:6443`. */
  server: string;
  /** PEM of the CA that signed the API server's serving cert. */
  caCertPem: string;
  clientCertPem: string;
  clientKeyPem: string;
  /** Cluster entry name. Default `provisioner`. */
  clusterName?: string;
  /** User entry name. Default `provisioner-admin`. */
  userName?: string;
  /** Context name (also the current context). Default `<userName>@<clusterName>`. */
  contextName?: string;
  /** Default namespace of the context. Default none (the server's `default`). */
  namespace?: string;
}

/** The kubeconfig YAML for `options`. It holds a private key: never log it. */
export function renderKubeconfig(options: KubeconfigOptions): string {
  const clusterName = options.clusterName ?? 'provisioner';
  const userName = options.userName ?? 'provisioner-admin';
  const contextName = options.contextName ?? `${userName}@${clusterName}`;
  const base64 = (pem: string) => Buffer.from(pem, 'utf8').toString('base64');
  return stringify({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: clusterName, cluster: { server: options.server, 'certificate-authority-data': base64(options.caCertPem) } }],
    users: [
      {
        name: userName,
        user: { 'client-certificate-data': base64(options.clientCertPem), 'client-key-data': base64(options.clientKeyPem) },
      },
    ],
    contexts: [
      {
        name: contextName,
        context: { cluster: clusterName, user: userName, ...(options.namespace === undefined ? {} : { namespace: options.namespace }) },
      },
    ],
    'current-context': contextName,
    preferences: {},
  });
}

/** Renders and writes a kubeconfig to `path`, mode 0600, atomically (the directory must exist). */
export async function writeKubeconfig(path: string, options: KubeconfigOptions): Promise<void> {
  await writeFileAtomic(path, renderKubeconfig(options), privateFileMode);
}

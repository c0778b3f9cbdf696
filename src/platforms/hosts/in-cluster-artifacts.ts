/**
 * Node files served from inside a self-managed hosts cluster. Once the local control plane
 * (whose forwarder served kubelet, kubeadm and the image archives) is gone, a host that joins
 * still downloads them: every node already holds each file at the path its bootstrap plan
 * wrote it to (checked by digest then), so a Deployment on a control-plane node serves those
 * very files read-only (hostPath mounts of exactly the listed files, `provisioner-forwarder`
 * serving only files, on its pod's address, as an unprivileged user with no API credentials).
 * Hosts reach it through the API server's service proxy
 * (`<server>/api/v1/namespaces/provisioner-agent-system/services/node-artifacts/proxy/<path>`),
 * with their agents' own credentials, which the agent manager grants `get` on that one
 * Service's proxy and nothing more; the digest each plan carries still checks the bytes.
 */
import type { InClusterArtifacts, InClusterObject, ServedArtifact } from '../platform.js';
import { artifactsConfigMapObject, hostArtifacts, hostPathOf } from './artifacts.js';

/** The Service (and Deployment) serving the node files; the agent manager's Role per host names it (provider/api/agent/v1alpha1 NodeArtifactsService). */
export const nodeArtifactsService = { namespace: 'provisioner-agent-system', name: 'node-artifacts' } as const;

/** The bundled binary that serves the files (its files-only mode). */
export const artifactsServerBinary = 'provisioner-forwarder';

/** The port the pod serves on; the Service's one port (unnamed, so the proxy URL names no port) is 80. */
const containerPort = 8080;

/** Where the pod mounts the files: `<servedDirectory>/<served path>`, as the local control plane's artifacts directory lays them out. */
const servedDirectory = '/artifacts';

/** The URL through the API server's service proxy of a served path. */
export function proxiedArtifactUrl(server: string, servedPath: string): string {
  return `${server.replace(/\/+$/, '')}/api/v1/namespaces/${nodeArtifactsService.namespace}/services/${nodeArtifactsService.name}/proxy/${servedPath}`;
}

const labels = { 'app.kubernetes.io/name': nodeArtifactsService.name, 'app.kubernetes.io/part-of': 'provisioner' };

/** The Deployment, its Service, and the list the HostMachine controller hands to new bootstrap plans, now with proxied URLs. */
export function renderInClusterArtifacts(input: { images: Readonly<Record<string, string>>; served: readonly ServedArtifact[]; server: string }): {
  objects: InClusterObject[];
  deployments: { namespace: string; name: string }[];
} {
  const image = input.images[artifactsServerBinary];
  if (image === undefined) throw new Error(`no image for ${artifactsServerBinary}`);
  const files = input.served.filter((a) => hostPathOf(a.path) !== undefined).sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  const { namespace, name } = nodeArtifactsService;
  const deployment: InClusterObject = {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name, namespace, labels },
    spec: {
      replicas: 1,
      selector: { matchLabels: { 'app.kubernetes.io/name': name } },
      template: {
        metadata: { labels },
        spec: {
          automountServiceAccountToken: false,
          enableServiceLinks: false,
          // A control-plane node: it outlives worker scale-downs, and every node holds the files.
          nodeSelector: { 'node-role.kubernetes.io/control-plane': '' },
          tolerations: [{ key: 'node-role.kubernetes.io/control-plane', operator: 'Exists', effect: 'NoSchedule' }],
          securityContext: { runAsNonRoot: true, runAsUser: 65534, runAsGroup: 65534, seccompProfile: { type: 'RuntimeDefault' } },
          containers: [
            {
              name: 'server',
              image,
              imagePullPolicy: 'Never',
              command: [`/usr/local/bin/${artifactsServerBinary}`, `--artifacts-listen=$(POD_IP):${containerPort}`, `--artifacts-dir=${servedDirectory}`],
              env: [{ name: 'POD_IP', valueFrom: { fieldRef: { fieldPath: 'status.podIP' } } }],
              ports: [{ name: 'http', containerPort, protocol: 'TCP' }],
              readinessProbe: { tcpSocket: { port: containerPort }, periodSeconds: 5 },
              securityContext: { allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ['ALL'] } },
              resources: { requests: { cpu: '10m', memory: '16Mi' } },
              volumeMounts: files.map((file, i) => ({ name: `file-${i}`, mountPath: `${servedDirectory}/${file.path}`, readOnly: true })),
            },
          ],
          volumes: files.map((file, i) => ({ name: `file-${i}`, hostPath: { path: hostPathOf(file.path)!, type: 'File' } })),
        },
      },
    },
  };
  const service: InClusterObject = {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name, namespace, labels },
    spec: { selector: { 'app.kubernetes.io/name': name }, ports: [{ port: 80, targetPort: containerPort, protocol: 'TCP' }] },
  };
  const list = hostArtifacts(files, (a) => proxiedArtifactUrl(input.server, a.path));
  return { objects: [service, deployment, artifactsConfigMapObject(list)], deployments: [{ namespace, name }] };
}

export const hostsInClusterArtifacts: InClusterArtifacts = { binaries: [artifactsServerBinary], render: renderInClusterArtifacts };

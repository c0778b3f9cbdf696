import { readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import type { ServedArtifact } from '../platform.js';
import { artifactsConfigMap, hostArtifacts, type HostArtifact } from './artifacts.js';
import { artifactsServerBinary, nodeArtifactsService, proxiedArtifactUrl, renderInClusterArtifacts } from './in-cluster-artifacts.js';

const served: ServedArtifact[] = [
  { path: 'node/bin/kubelet', sha256: 'a'.repeat(64), url: 'http://198.18.0.1:6480/node/bin/kubelet' },
  { path: 'node/bin/kubeadm', sha256: 'b'.repeat(64), url: 'http://198.18.0.1:6480/node/bin/kubeadm' },
  { path: 'node/images/pause.tar', sha256: 'c'.repeat(64), url: 'http://198.18.0.1:6480/node/images/pause.tar' },
  { path: `node/loaded/${'d'.repeat(64)}.tar`, sha256: 'd'.repeat(64), url: `http://198.18.0.1:6480/node/loaded/${'d'.repeat(64)}.tar` },
  { path: 'node/loaded/records.json', sha256: 'e'.repeat(64), url: 'http://198.18.0.1:6480/node/loaded/records.json' },
];
const server = 'https://198.19.0.10:6443';
const rendered = renderInClusterArtifacts({ images: { [artifactsServerBinary]: 'provisioner.local/provisioner-forwarder:v0.1.0' }, served, server });

interface PodSpecView {
  automountServiceAccountToken?: boolean;
  securityContext?: { runAsNonRoot?: boolean; runAsUser?: number };
  containers: { command: string[]; volumeMounts: { name: string; mountPath: string; readOnly?: boolean }[]; securityContext?: Record<string, unknown> }[];
  volumes: { name: string; hostPath: { path: string; type: string } }[];
}
const objectOf = (kind: string) => rendered.objects.find((o) => o.kind === kind)!;

describe('node artifacts served from inside the cluster', () => {
  it('gives hosts URLs through the API server service proxy of the one Service, naming no port', () => {
    expect(proxiedArtifactUrl(`${server}/`, 'node/bin/kubelet')).toBe(`${server}/api/v1/namespaces/provisioner-agent-system/services/node-artifacts/proxy/node/bin/kubelet`);
    const list = JSON.parse((objectOf('ConfigMap') as unknown as { data: Record<string, string> }).data[artifactsConfigMap.key]!) as HostArtifact[];
    // The same downloads as from the local control plane (paths, digests, modes), only the URLs differ.
    const local = hostArtifacts(served);
    expect(list.map((a) => ({ ...a, url: '' }))).toEqual(local.map((a) => ({ ...a, url: '' })));
    expect(list.map((a) => a.url)).toEqual(local.map((a) => proxiedArtifactUrl(server, a.url.replace('http://198.18.0.1:6480/', ''))));
    const service = objectOf('Service') as unknown as { spec: { ports: { name?: string; port: number }[] } };
    // One unnamed port: `services/node-artifacts/proxy` reaches it, and RBAC's resourceName is the bare name.
    expect(service.spec.ports).toHaveLength(1);
    expect(service.spec.ports[0]!.name).toBeUndefined();
    expect(rendered.deployments).toEqual([nodeArtifactsService]);
  });

  it('names the Service the agent manager grants each agent services/proxy get on', async () => {
    const go = await readFile(new URL('../../../provider/api/agent/v1alpha1/groupversion_info.go', import.meta.url), 'utf8');
    expect(go).toContain(`NodeArtifactsNamespace = "${nodeArtifactsService.namespace}"`);
    expect(go).toContain(`NodeArtifactsService   = "${nodeArtifactsService.name}"`);
    const rbac = await readFile(new URL('../../../provider/internal/controller/rbac.go', import.meta.url), 'utf8');
    expect(rbac).toMatch(/Resources: \[\]string\{"services\/proxy"\}, ResourceNames: \[\]string\{agentv1\.NodeArtifactsService\}, Verbs: \[\]string\{"get"\}/);
  });

  it('mounts exactly the listed files read-only from where each node wrote them, unprivileged and without API credentials', () => {
    const pod = (objectOf('Deployment') as unknown as { spec: { template: { spec: PodSpecView } } }).spec.template.spec;
    const container = pod.containers[0]!;
    const mounts = Object.fromEntries(container.volumeMounts.map((m) => [m.mountPath, { path: pod.volumes.find((v) => v.name === m.name)!.hostPath.path, readOnly: m.readOnly }]));
    expect(mounts).toEqual({
      '/artifacts/node/bin/kubeadm': { path: '/usr/local/bin/kubeadm', readOnly: true },
      '/artifacts/node/bin/kubelet': { path: '/usr/local/bin/kubelet', readOnly: true },
      '/artifacts/node/images/pause.tar': { path: '/var/lib/provisioner/images/pause.tar', readOnly: true },
      [`/artifacts/node/loaded/${'d'.repeat(64)}.tar`]: { path: `/var/lib/provisioner/images/loaded/${'d'.repeat(64)}.tar`, readOnly: true },
    });
    expect(pod.volumes.every((v) => v.hostPath.type === 'File')).toBe(true);
    expect(pod.automountServiceAccountToken).toBe(false);
    expect(pod.securityContext).toMatchObject({ runAsNonRoot: true, runAsUser: 65534 });
    expect(container.securityContext).toMatchObject({ allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ['ALL'] } });
    // Files only, on the pod's own address (never a wildcard).
    expect(container.command).toEqual(['/usr/local/bin/provisioner-forwarder', '--artifacts-listen=$(POD_IP):8080', '--artifacts-dir=/artifacts']);
  });
});

import { beforeAll, describe, expect, it } from 'vitest';
import type { KubeObject } from '../kube/client.js';
import { createCertificateAuthority, issueCertificate, type CertificateAndKey } from '../pki/index.js';
import { ensureWebhookCertificates } from './certificates.js';
import {
  allObjects,
  conflictingProviders,
  managerRules,
  renderManagement,
  serviceWebhooks,
  UnservedWebhookError,
  webhookDnsNames,
  type ManagedProvider,
  type WebhookCertificates,
} from './manifests.js';

const ns = (provider: string) =>
  ({ 'cluster-api': 'capi-system', 'bootstrap-kubeadm': 'capi-kubeadm-bootstrap-system', 'control-plane-kubeadm': 'capi-kubeadm-control-plane-system', 'agent-provisioner': 'provisioner-agent-system' })[provider]!;

function components(provider: string, type: string, group: string, version: string): KubeObject[] {
  const namespace = ns(provider);
  return [
    { apiVersion: 'v1', kind: 'Namespace', metadata: { name: namespace } },
    {
      apiVersion: 'apiextensions.k8s.io/v1', kind: 'CustomResourceDefinition', metadata: { name: `things.${group}` },
      spec: { group, conversion: { strategy: 'Webhook', webhook: { conversionReviewVersions: ['v1'], clientConfig: { service: { name: 'webhook-service', namespace, path: '/convert' } } } } },
    },
    {
      apiVersion: 'admissionregistration.k8s.io/v1', kind: 'ValidatingWebhookConfiguration', metadata: { name: `${provider}-validating` },
      webhooks: [{ name: `v.${group}`, clientConfig: { service: { name: 'webhook-service', namespace, path: '/validate' } } }],
    },
    // The manager's rules from its role.yaml, as the bundle build carries them (scripts/bundle/components.ts).
    { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRole', metadata: { name: `${provider}-manager-role` }, rules: [{ apiGroups: [group], resources: ['things'], verbs: ['get', 'list', 'watch'] }] },
    {
      apiVersion: 'clusterctl.cluster.x-k8s.io/v1alpha3', kind: 'Provider', metadata: { name: provider, namespace, labels: { 'clusterctl.cluster.x-k8s.io': 'inventory' } },
      providerName: provider.replace(/^(bootstrap|control-plane|infrastructure)-/, ''), type, version,
    },
  ];
}

const providers: ManagedProvider[] = [
  { provider: 'cluster-api', namespace: 'capi-system', version: 'v1.14.2', components: components('cluster-api', 'CoreProvider', 'cluster.x-k8s.io', 'v1.14.2'), binary: 'capi-manager', image: 'provisioner.local/capi-manager:v1.14.2', featureGates: { ClusterTopology: true } },
  { provider: 'bootstrap-kubeadm', namespace: 'capi-kubeadm-bootstrap-system', version: 'v1.14.2', components: components('bootstrap-kubeadm', 'BootstrapProvider', 'bootstrap.cluster.x-k8s.io', 'v1.14.2'), binary: 'capi-manager', image: 'provisioner.local/capi-manager:v1.14.2' },
  { provider: 'control-plane-kubeadm', namespace: 'capi-kubeadm-control-plane-system', version: 'v1.14.2', components: components('control-plane-kubeadm', 'ControlPlaneProvider', 'controlplane.cluster.x-k8s.io', 'v1.14.2'), binary: 'capi-manager', image: 'provisioner.local/capi-manager:v1.14.2', featureGates: { ClusterTopology: true } },
  { provider: 'agent-provisioner', namespace: 'provisioner-agent-system', version: 'v0.1.0', components: components('agent-provisioner', 'InfrastructureProvider', 'infrastructure.provisioner.dev', 'v0.1.0'), binary: 'provisioner-agent-manager', image: 'provisioner.local/provisioner-agent-manager:v0.1.0' },
];

let certs: WebhookCertificates;
beforeAll(async () => {
  certs = await ensureWebhookCertificates({ serving: new Map() }, providers.map((p) => p.namespace));
}, 120_000);

const b64 = (s: string) => Buffer.from(s).toString('base64');
const find = (objects: readonly KubeObject[], kind: string, name: string, namespace?: string) =>
  objects.find((o) => o.kind === kind && o.metadata.name === name && (namespace === undefined || o.metadata.namespace === namespace));

describe('renderManagement', () => {
  it('lays out one namespace, ServiceAccount, RBAC, Secret, Service and Deployment per provider, with clusterctl labels on everything', () => {
    const out = renderManagement(providers, certs);
    expect(out.namespaces.map((n) => n.metadata.name)).toEqual(providers.map((p) => p.namespace));
    expect(out.deployments).toEqual([
      { namespace: 'capi-system', name: 'capi-controller-manager', provider: 'cluster-api' },
      { namespace: 'capi-kubeadm-bootstrap-system', name: 'capi-kubeadm-bootstrap-controller-manager', provider: 'bootstrap-kubeadm' },
      { namespace: 'capi-kubeadm-control-plane-system', name: 'capi-kubeadm-control-plane-controller-manager', provider: 'control-plane-kubeadm' },
      { namespace: 'provisioner-agent-system', name: 'provisioner-agent-controller-manager', provider: 'agent-provisioner' },
    ]);
    for (const obj of allObjects(out)) {
      expect(obj.metadata.labels?.['clusterctl.cluster.x-k8s.io'], `${obj.kind} ${obj.metadata.name}`).toBeDefined();
      expect(obj.metadata.labels?.['cluster.x-k8s.io/provider'], `${obj.kind} ${obj.metadata.name}`).toBeDefined();
    }
    for (const p of providers) {
      const sa = find(out.workloads, 'ServiceAccount', `${p.provider === 'agent-provisioner' ? 'provisioner-agent' : p.provider === 'cluster-api' ? 'capi' : p.provider === 'bootstrap-kubeadm' ? 'capi-kubeadm-bootstrap' : 'capi-kubeadm-control-plane'}-manager`, p.namespace);
      expect(sa, p.provider).toBeDefined();
      const service = find(out.workloads, 'Service', 'webhook-service', p.namespace) as KubeObject & { spec: { ports: { port: number; targetPort: string }[]; selector: Record<string, string> } };
      expect(service.spec.ports).toEqual([{ name: 'webhook', port: 443, targetPort: 'webhook-server', protocol: 'TCP' }]);
      const deployment = out.workloads.find((o) => o.kind === 'Deployment' && o.metadata.namespace === p.namespace) as KubeObject & { spec: { selector: { matchLabels: Record<string, string> }; template: { spec: { serviceAccountName: string; containers: { image: string; args: string[] }[]; volumes: { secret: { secretName: string } }[] } } } };
      expect(deployment.spec.selector.matchLabels).toEqual(service.spec.selector);
      expect(deployment.spec.template.spec.serviceAccountName).toBe(sa!.metadata.name);
      expect(deployment.spec.template.spec.containers[0]!.image).toBe(p.image);
      expect(deployment.spec.template.spec.volumes[0]!.secret.secretName).toBe('webhook-service-cert');
      const secret = find(out.workloads, 'Secret', 'webhook-service-cert', p.namespace) as KubeObject & { data: Record<string, string> };
      expect(secret.data['tls.crt']).toBe(b64(certs.serving.get(p.namespace)!.certPem));
      expect(secret.data['ca.crt']).toBe(b64(certs.ca.certPem));
    }
  });

  it('runs capi-manager once per provider namespace with --providers naming it, and the agent manager bound to every interface', () => {
    const out = renderManagement(providers, certs);
    const args = (namespace: string) => (out.workloads.find((o) => o.kind === 'Deployment' && o.metadata.namespace === namespace) as KubeObject & { spec: { template: { spec: { containers: { args: string[]; env: { name: string; value?: string }[] }[] } } } }).spec.template.spec.containers[0]!;
    expect(args('capi-system').args).toEqual(['--providers=cluster-api', '--leader-elect', '--health-addr=:9440', '--webhook-port=9443', '--feature-gates=ClusterTopology=true']);
    expect(args('capi-kubeadm-bootstrap-system').args).toContain('--providers=bootstrap-kubeadm');
    expect(args('capi-kubeadm-bootstrap-system').args.some((a) => a.startsWith('--feature-gates'))).toBe(false);
    expect(args('provisioner-agent-system').env).toContainEqual({ name: 'PROVISIONER_BIND_ADDRESS', value: '0.0.0.0' });
    expect(args('capi-system').env.some((e) => e.name === 'PROVISIONER_BIND_ADDRESS')).toBe(false);
  });

  it('binds each manager to the rules its source declares, with upstream\'s aggregation for core and KCP and our kinds aggregated to them', () => {
    const out = renderManagement(providers, certs);
    const role = find(out.workloads, 'ClusterRole', 'capi-kubeadm-bootstrap-manager-role') as KubeObject & { rules: unknown[] };
    expect(role.rules).toEqual([{ apiGroups: ['bootstrap.cluster.x-k8s.io'], resources: ['things'], verbs: ['get', 'list', 'watch'] }]);
    // The components' own ClusterRole is not applied as it is: its rules are bound under upstream's names.
    expect(find(out.workloads, 'ClusterRole', 'bootstrap-kubeadm-manager-role')).toBeUndefined();
    expect(managerRules(providers[1]!.components.filter((o) => o.kind !== 'ClusterRole'))).toBeUndefined();
    const binding = find(out.workloads, 'ClusterRoleBinding', 'capi-kubeadm-bootstrap-manager-rolebinding') as KubeObject & { subjects: unknown[] };
    expect(binding.subjects).toEqual([{ kind: 'ServiceAccount', name: 'capi-kubeadm-bootstrap-manager', namespace: 'capi-kubeadm-bootstrap-system' }]);
    expect(find(out.workloads, 'ClusterRole', 'capi-aggregated-manager-role')).toMatchObject({ aggregationRule: { clusterRoleSelectors: [{ matchLabels: { 'cluster.x-k8s.io/aggregate-to-manager': 'true' } }] } });
    expect(find(out.workloads, 'ClusterRole', 'capi-kubeadm-control-plane-aggregated-manager-role')).toBeDefined();
    const ours = find(out.workloads, 'ClusterRole', 'provisioner-agent-aggregated-to-capi-role') as KubeObject & { rules: { apiGroups: string[] }[] };
    expect(ours.metadata.labels).toMatchObject({ 'cluster.x-k8s.io/aggregate-to-manager': 'true', 'kubeadm.controlplane.cluster.x-k8s.io/aggregate-to-manager': 'true' });
    expect(ours.rules[0]!.apiGroups).toEqual(['infrastructure.provisioner.dev']);
    expect(find(out.workloads, 'Role', 'capi-leader-election-role', 'capi-system')).toBeDefined();
    expect(find(out.workloads, 'RoleBinding', 'capi-leader-election-rolebinding', 'capi-system')).toBeDefined();
  });

  it('keeps the webhooks on their in-cluster Services (port 443) with our CA as caBundle, for admission and CRD conversion', () => {
    const out = renderManagement(providers, certs);
    const caBundle = b64(certs.ca.certPem);
    for (const hook of out.webhooks) {
      for (const w of hook.webhooks as { clientConfig: { service: { name: string; namespace: string; port: number }; caBundle: string; url?: string } }[]) {
        expect(w.clientConfig.url).toBeUndefined();
        expect(w.clientConfig.service.name).toBe('webhook-service');
        expect(w.clientConfig.service.port).toBe(443);
        expect(w.clientConfig.caBundle).toBe(caBundle);
      }
    }
    const crd = find(out.crds, 'CustomResourceDefinition', 'things.cluster.x-k8s.io') as KubeObject & { spec: { conversion: { webhook: { clientConfig: unknown } } } };
    expect(crd.spec.conversion.webhook.clientConfig).toEqual({ service: { name: 'webhook-service', namespace: 'capi-system', path: '/convert', port: 443 }, caBundle });
  });

  it('refuses a webhook no installed provider serves', () => {
    const foreign: KubeObject = { apiVersion: 'admissionregistration.k8s.io/v1', kind: 'ValidatingWebhookConfiguration', metadata: { name: 'x' }, webhooks: [{ name: 'w', clientConfig: { service: { name: 'webhook-service', namespace: 'elsewhere' } } }] };
    expect(() => serviceWebhooks(foreign, new Set(['capi-system']), certs.ca.certPem)).toThrow(UnservedWebhookError);
  });

  it('writes clusterctl\'s inventory with clusterctl\'s labels, and keeps the CA beside the core provider', () => {
    const out = renderManagement(providers, certs);
    expect(out.inventory.map((p) => `${p.metadata.namespace}/${p.metadata.name} ${String(p.type)} ${String(p.version)}`)).toEqual([
      'capi-system/cluster-api CoreProvider v1.14.2',
      'capi-kubeadm-bootstrap-system/bootstrap-kubeadm BootstrapProvider v1.14.2',
      'capi-kubeadm-control-plane-system/control-plane-kubeadm ControlPlaneProvider v1.14.2',
      'provisioner-agent-system/agent-provisioner InfrastructureProvider v0.1.0',
    ]);
    for (const p of out.inventory) {
      expect(p.metadata.labels).toEqual({ 'clusterctl.cluster.x-k8s.io': '', 'clusterctl.cluster.x-k8s.io/core': 'inventory', 'cluster.x-k8s.io/provider': p.metadata.name });
    }
    const ca = find(out.workloads, 'Secret', 'provisioner-webhook-ca', 'capi-system') as KubeObject & { data: Record<string, string> };
    expect(ca.data['tls.key']).toBe(b64(certs.ca.keyPem));
  });

  it('renders the same objects from the same certificates (a second run applies nothing new)', () => {
    expect(renderManagement(providers, certs)).toEqual(renderManagement(providers, certs));
  });
});

describe('conflictingProviders', () => {
  it('names installed providers of another version or namespace, and lets ours through', () => {
    const installed = [
      { namespace: 'capi-system', name: 'cluster-api', providerName: 'cluster-api', type: 'CoreProvider', version: 'v1.10.0' },
      { namespace: 'capi-kubeadm-bootstrap-system', name: 'bootstrap-kubeadm', providerName: 'kubeadm', type: 'BootstrapProvider', version: 'v1.14.2' },
      { namespace: 'other', name: 'control-plane-kubeadm', providerName: 'kubeadm', type: 'ControlPlaneProvider', version: 'v1.14.2' },
      { namespace: 'capd-system', name: 'infrastructure-docker', providerName: 'docker', type: 'InfrastructureProvider', version: 'v1.9.0' },
    ];
    expect(conflictingProviders(providers, installed).map((c) => `${c.namespace}/${c.name} ${c.version}`)).toEqual(['capi-system/cluster-api v1.10.0', 'other/control-plane-kubeadm v1.14.2']);
    expect(conflictingProviders(providers, [installed[1]!])).toEqual([]);
  });
});

describe('ensureWebhookCertificates', () => {
  it('keeps a CA and serving certificates that are still good, and issues the rest', async () => {
    const again = await ensureWebhookCertificates({ ca: certs.ca, serving: certs.serving }, providers.map((p) => p.namespace));
    expect(again.issued).toEqual([]);
    expect(again.ca).toBe(certs.ca);
    const cert = again.serving.get('capi-system')!;
    expect(cert).toBe(certs.serving.get('capi-system'));
    expect(cert.certPem).toBeTruthy();
  });

  it('renews a serving certificate close to expiry, one for other names, and all of them with a new CA', async () => {
    const soon: CertificateAndKey = await issueCertificate(certs.ca, { commonName: 'x', dnsNames: webhookDnsNames('capi-system'), usages: 'server', validityDays: 30 });
    const wrongNames = await issueCertificate(certs.ca, { commonName: 'x', dnsNames: ['elsewhere.svc'], usages: 'server' });
    const serving = new Map(certs.serving);
    serving.set('capi-system', soon);
    serving.set('capi-kubeadm-bootstrap-system', wrongNames);
    const renewed = await ensureWebhookCertificates({ ca: certs.ca, serving }, providers.map((p) => p.namespace));
    expect(renewed.issued).toEqual(['capi-system', 'capi-kubeadm-bootstrap-system']);
    const newCa = await createCertificateAuthority({ commonName: 'old', validityDays: 100 });
    const all = await ensureWebhookCertificates({ ca: newCa, serving: certs.serving }, providers.map((p) => p.namespace));
    expect(all.issued).toEqual(['CA', ...providers.map((p) => p.namespace)]);
  }, 120_000);
});


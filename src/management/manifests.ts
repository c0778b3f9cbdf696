/**
 * `management install`'s objects: the bundled providers laid out in a real cluster the way
 * `clusterctl init` lays them out (cmd/clusterctl/client/cluster/installer.go and each
 * provider's config/ kustomization), rendered from the same component files the local
 * control plane installs (bundle/components/*.yaml, scripts/bundle/components.ts):
 *
 *  - per provider namespace: the Namespace, a ServiceAccount, a ClusterRole with the rules its
 *    own source declares (its config/rbac/role.yaml, carried in its components by the bundle
 *    build: `managerRules`) and its binding, a leader-election Role and its
 *    binding, the webhook serving certificate as a `kubernetes.io/tls` Secret, the
 *    `webhook-service` Service (443 → the pod's 9443) and one Deployment of the manager;
 *  - the CRDs with their conversion webhooks calling that Service (a caBundle from our CA);
 *  - the webhook configurations, their clientConfigs still naming the Services (the local
 *    control plane rewrites them to loopback instead: controlplane/webhooks.ts);
 *  - clusterctl's inventory: a `providers.clusterctl.cluster.x-k8s.io` object per provider with
 *    clusterctl's labels, so `clusterctl describe`, `move` and `upgrade plan` recognise them.
 *
 * Every object carries clusterctl's labels (`clusterctl.cluster.x-k8s.io: ""` and
 * `cluster.x-k8s.io/provider`), as `clusterctl init` sets them; `clusterctl delete` selects by them.
 *
 * One Deployment per provider namespace, each running one provider: capi-manager (which can
 * serve the core, kubeadm bootstrap and control-plane providers in one process) is run three
 * times with `--providers` naming one each. docs/architecture.md, "Self-managed clusters", says why.
 *
 * Pure: the caller reads the cluster, builds the images and the certificates.
 */
import type { KubeObject } from '../kube/client.js';
import type { CertificateAndKey } from '../pki/index.js';

export interface PolicyRule {
  apiGroups?: string[];
  resources?: string[];
  resourceNames?: string[];
  verbs: string[];
}

/** Labels clusterctl puts on every object it installs, and on its inventory. */
export const clusterctlLabel = 'clusterctl.cluster.x-k8s.io';
export const clusterctlCoreLabel = 'clusterctl.cluster.x-k8s.io/core';
export const providerLabel = 'cluster.x-k8s.io/provider';
/** Upstream's aggregation labels: core CAPI's and KCP's managers get the rules of every ClusterRole labelled so. */
export const aggregateToCapiLabel = 'cluster.x-k8s.io/aggregate-to-manager';
export const aggregateToKcpLabel = 'kubeadm.controlplane.cluster.x-k8s.io/aggregate-to-manager';

/** The Service every webhook clientConfig of the bundled components names (scripts/bundle/components.ts). */
export const webhookServiceName = 'webhook-service';
/** The Secret holding a namespace's webhook serving certificate. */
export const webhookSecretName = 'webhook-service-cert';
/** The Secret in the core provider's namespace holding the CA that signs them (cert and key). */
export const webhookCaSecretName = 'provisioner-webhook-ca';
/** Where controller-runtime reads the serving certificate (its default). */
export const webhookCertDir = '/tmp/k8s-webhook-server/serving-certs';
export const webhookPort = 9443;
export const healthPort = 9440;
/** The user the managers run as (upstream's: distroless nonroot); the images hold only the binary. */
export const managerUid = 65532;

/** A bundled provider to install. */
export interface ManagedProvider {
  /** clusterctl name, e.g. `cluster-api`, `bootstrap-kubeadm`, `agent-provisioner`. */
  provider: string;
  namespace: string;
  /** The inventory's version, e.g. `v1.14.2`. */
  version: string;
  /** The objects of its component file (CRDs, Namespace, webhook configurations, inventory). */
  components: readonly KubeObject[];
  /** The bundled binary serving it: `capi-manager` (told which provider by --providers) or its own manager. */
  binary: string;
  /** The image the Deployment runs, e.g. `provisioner.local/capi-manager:v1.14.2`, or `<registry>/capi-manager:v1.14.2@sha256:…`. */
  image: string;
  featureGates?: Readonly<Record<string, boolean>>;
}

/** Webhook serving material: the CA every caBundle names and one serving certificate per provider namespace. */
export interface WebhookCertificates {
  ca: CertificateAndKey;
  serving: ReadonlyMap<string, CertificateAndKey>;
}

/** The objects in the order they are applied; each phase waits for the one before (see management/install.ts). */
export interface ManagementObjects {
  namespaces: KubeObject[];
  crds: KubeObject[];
  /** ServiceAccounts, RBAC, Secrets, Services and Deployments. */
  workloads: KubeObject[];
  /** Webhook configurations: applied once the Deployments are Available, so their servers answer. */
  webhooks: KubeObject[];
  inventory: KubeObject[];
  /** The Deployments, by namespace/name, for the wait. */
  deployments: { namespace: string; name: string; provider: string }[];
}

export class UnservedWebhookError extends Error {}

/** Upstream's name prefixes (kustomize namePrefix of each provider's config/default); ours for the agent provider. */
const namePrefixes: Readonly<Record<string, string>> = {
  'cluster-api': 'capi',
  'bootstrap-kubeadm': 'capi-kubeadm-bootstrap',
  'control-plane-kubeadm': 'capi-kubeadm-control-plane',
  'agent-provisioner': 'provisioner-agent',
};

export function namePrefix(provider: string): string {
  return namePrefixes[provider] ?? provider;
}

/** The Deployment of a provider: `<prefix>-controller-manager`, as upstream names it. */
export function deploymentName(provider: string): string {
  return `${namePrefix(provider)}-controller-manager`;
}

const isWebhookConfiguration = (o: KubeObject) => o.kind === 'MutatingWebhookConfiguration' || o.kind === 'ValidatingWebhookConfiguration';

function commonLabels(provider: string): Record<string, string> {
  return { [clusterctlLabel]: '', [providerLabel]: provider };
}

function withLabels(obj: KubeObject, labels: Record<string, string>): KubeObject {
  return { ...obj, metadata: { ...obj.metadata, labels: { ...obj.metadata.labels, ...labels } } };
}

const b64 = (text: string) => Buffer.from(text).toString('base64');

interface ClientConfig {
  service?: { name: string; namespace: string; path?: string; port?: number };
  url?: string;
  caBundle?: string;
}

/** A clientConfig calling `webhook-service` in a namespace we install, port 443, with our CA. */
function serviceClientConfig(config: ClientConfig, namespaces: ReadonlySet<string>, caBundle: string, where: string): ClientConfig {
  const service = config.service;
  if (!service || !namespaces.has(service.namespace)) {
    throw new UnservedWebhookError(`${where} calls ${service ? `a webhook in namespace ${service.namespace}` : config.url ?? 'no Service'}, which no installed provider serves`);
  }
  return { service: { name: service.name, namespace: service.namespace, ...(service.path ? { path: service.path } : {}), port: 443 }, caBundle };
}

/** Points a webhook configuration's or a CRD's conversion webhook at the in-cluster Service with `caBundle`; other objects unchanged. */
export function serviceWebhooks(obj: KubeObject, namespaces: ReadonlySet<string>, caPem: string): KubeObject {
  const caBundle = b64(caPem);
  if (isWebhookConfiguration(obj)) {
    const webhooks = (obj.webhooks as { name: string; clientConfig: ClientConfig }[] | undefined) ?? [];
    return { ...obj, webhooks: webhooks.map((hook) => ({ ...hook, clientConfig: serviceClientConfig(hook.clientConfig, namespaces, caBundle, `${obj.kind} ${obj.metadata.name} webhook ${hook.name}`) })) };
  }
  if (obj.kind === 'CustomResourceDefinition') {
    const spec = obj.spec as { conversion?: { strategy?: string; webhook?: { clientConfig?: ClientConfig } } };
    const webhook = spec.conversion?.strategy === 'Webhook' ? spec.conversion.webhook : undefined;
    if (!webhook?.clientConfig) return obj;
    return {
      ...obj,
      spec: { ...spec, conversion: { ...spec.conversion, webhook: { ...webhook, clientConfig: serviceClientConfig(webhook.clientConfig, namespaces, caBundle, `CRD ${obj.metadata.name} conversion`) } } },
    };
  }
  return obj;
}

/** The serving certificate's DNS names for a namespace's webhook Service (what the API server dials). */
export function webhookDnsNames(namespace: string): string[] {
  return [`${webhookServiceName}.${namespace}.svc`, `${webhookServiceName}.${namespace}.svc.cluster.local`];
}

/** The manager container's arguments. */
export function managerArgs(p: ManagedProvider): string[] {
  const gates = Object.entries(p.featureGates ?? {}).sort(([a], [b]) => a.localeCompare(b)).map(([k, v]) => `${k}=${v}`).join(',');
  if (p.binary === 'capi-manager') {
    return [`--providers=${p.provider}`, '--leader-elect', `--health-addr=:${healthPort}`, `--webhook-port=${webhookPort}`, ...(gates ? [`--feature-gates=${gates}`] : [])];
  }
  // The agent manager binds every listener to PROVISIONER_BIND_ADDRESS (see managerEnv); its flags are its own.
  return ['--leader-elect', `--webhook-port=${webhookPort}`, `--health-addr=:${healthPort}`, ...(gates ? [`--feature-gates=${gates}`] : [])];
}

function managerEnv(p: ManagedProvider): { name: string; value?: string; valueFrom?: unknown }[] {
  const env: { name: string; value?: string; valueFrom?: unknown }[] = [
    { name: 'POD_NAMESPACE', valueFrom: { fieldRef: { fieldPath: 'metadata.namespace' } } },
    { name: 'POD_NAME', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
  ];
  // Our agent manager binds to 127.0.0.1 unless told otherwise (a local control plane's default); in a pod, every interface.
  if (p.binary !== 'capi-manager') env.push({ name: 'PROVISIONER_BIND_ADDRESS', value: '0.0.0.0' });
  return env;
}

/**
 * The rules of a provider's manager ClusterRole as its own source declares them (controller-gen
 * output of its kubebuilder markers, config/rbac/role.yaml), which the bundle build carries in
 * its components (scripts/bundle/components.ts); undefined for a provider whose components carry
 * none (one `management install` does not run as a pod).
 */
export function managerRules(components: readonly KubeObject[]): PolicyRule[] | undefined {
  return (components.find((o) => o.kind === 'ClusterRole') as (KubeObject & { rules?: PolicyRule[] }) | undefined)?.rules;
}

function rbacObjects(p: ManagedProvider, serviceAccount: string, labels: Record<string, string>): KubeObject[] {
  const prefix = namePrefix(p.provider);
  const rules = managerRules(p.components);
  if (!rules) throw new Error(`the components of provider ${p.provider} carry no manager ClusterRole`);
  const subject = [{ kind: 'ServiceAccount', name: serviceAccount, namespace: p.namespace }];
  const objects: KubeObject[] = [
    { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: serviceAccount, namespace: p.namespace, labels } },
    { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRole', metadata: { name: `${prefix}-manager-role`, labels }, rules: [...rules, ...extraRules(p.provider)] },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRoleBinding', metadata: { name: `${prefix}-manager-rolebinding`, labels },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: `${prefix}-manager-role` }, subjects: subject,
    },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'Role', metadata: { name: `${prefix}-leader-election-role`, namespace: p.namespace, labels },
      rules: [
        { apiGroups: [''], resources: ['events'], verbs: ['create'] },
        { apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ['get', 'list', 'watch', 'create', 'update', 'patch', 'delete'] },
      ],
    },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'RoleBinding', metadata: { name: `${prefix}-leader-election-rolebinding`, namespace: p.namespace, labels },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: `${prefix}-leader-election-role` }, subjects: subject,
    },
  ];
  // Upstream's aggregated roles: core CAPI and KCP reach other providers' kinds through the ClusterRoles labelled for them.
  const aggregated = p.provider === 'cluster-api' ? aggregateToCapiLabel : p.provider === 'control-plane-kubeadm' ? aggregateToKcpLabel : undefined;
  if (aggregated) {
    objects.push(
      { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRole', metadata: { name: `${prefix}-aggregated-manager-role`, labels }, aggregationRule: { clusterRoleSelectors: [{ matchLabels: { [aggregated]: 'true' } }] } },
      {
        apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRoleBinding', metadata: { name: `${prefix}-aggregated-manager-rolebinding`, labels },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: `${prefix}-aggregated-manager-role` }, subjects: subject,
      },
    );
  }
  // An infrastructure provider outside infrastructure.cluster.x-k8s.io grants core CAPI and KCP its kinds, as upstream providers do.
  const ownGroups = [...new Set(p.components.filter((o) => o.kind === 'CustomResourceDefinition').map((o) => String((o.spec as { group: string }).group)))]
    .filter((g) => !g.endsWith('.cluster.x-k8s.io') && g !== 'cluster.x-k8s.io')
    .sort();
  if (ownGroups.length > 0) {
    objects.push({
      apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRole',
      metadata: { name: `${prefix}-aggregated-to-capi-role`, labels: { ...labels, [aggregateToCapiLabel]: 'true', [aggregateToKcpLabel]: 'true' } },
      rules: [{ apiGroups: ownGroups, resources: ['*'], verbs: ['create', 'delete', 'get', 'list', 'patch', 'update', 'watch'] }],
    });
  }
  return objects;
}

/**
 * What a manager needs beyond its source's markers: the metrics endpoint's authentication
 * (controller-runtime's filter, which upstream's CAPI markers already carry) and reading the CRDs.
 */
function extraRules(provider: string): PolicyRule[] {
  if (provider !== 'agent-provisioner') return [];
  return [
    { apiGroups: ['authentication.k8s.io'], resources: ['tokenreviews'], verbs: ['create'] },
    { apiGroups: ['authorization.k8s.io'], resources: ['subjectaccessreviews'], verbs: ['create'] },
  ];
}

function workloadObjects(p: ManagedProvider, cert: CertificateAndKey, caPem: string): KubeObject[] {
  const labels = commonLabels(p.provider);
  const prefix = namePrefix(p.provider);
  const serviceAccount = `${prefix}-manager`;
  const selector = { [providerLabel]: p.provider, 'control-plane': 'controller-manager' };
  const name = deploymentName(p.provider);
  return [
    ...rbacObjects(p, serviceAccount, labels),
    {
      apiVersion: 'v1', kind: 'Secret', type: 'kubernetes.io/tls',
      metadata: { name: webhookSecretName, namespace: p.namespace, labels },
      data: { 'tls.crt': b64(cert.certPem), 'tls.key': b64(cert.keyPem), 'ca.crt': b64(caPem) },
    },
    {
      apiVersion: 'v1', kind: 'Service', metadata: { name: webhookServiceName, namespace: p.namespace, labels },
      spec: { selector, ports: [{ name: 'webhook', port: 443, targetPort: 'webhook-server', protocol: 'TCP' }] },
    },
    {
      apiVersion: 'apps/v1', kind: 'Deployment', metadata: { name, namespace: p.namespace, labels: { ...labels, 'control-plane': 'controller-manager' } },
      spec: {
        replicas: 1,
        selector: { matchLabels: selector },
        template: {
          metadata: { labels: { ...selector, [clusterctlLabel]: '' } },
          spec: {
            serviceAccountName: serviceAccount,
            terminationGracePeriodSeconds: 10,
            securityContext: { runAsNonRoot: true, runAsUser: managerUid, runAsGroup: managerUid, seccompProfile: { type: 'RuntimeDefault' } },
            tolerations: [
              { key: 'node-role.kubernetes.io/control-plane', effect: 'NoSchedule' },
              { key: 'node-role.kubernetes.io/master', effect: 'NoSchedule' },
            ],
            containers: [
              {
                name: 'manager',
                image: p.image,
                // Loaded onto the nodes (`images load`; provisioner.local is no registry), or pushed to the user's registry and pinned by digest.
                imagePullPolicy: 'IfNotPresent',
                args: managerArgs(p),
                env: managerEnv(p),
                ports: [
                  { name: 'webhook-server', containerPort: webhookPort, protocol: 'TCP' },
                  { name: 'healthz', containerPort: healthPort, protocol: 'TCP' },
                ],
                readinessProbe: { httpGet: { path: '/readyz', port: 'healthz' }, periodSeconds: 5 },
                livenessProbe: { httpGet: { path: '/healthz', port: 'healthz' }, initialDelaySeconds: 15, periodSeconds: 10 },
                securityContext: { allowPrivilegeEscalation: false, privileged: false, readOnlyRootFilesystem: true, capabilities: { drop: ['ALL'] } },
                volumeMounts: [{ name: 'cert', mountPath: webhookCertDir, readOnly: true }],
              },
            ],
            volumes: [{ name: 'cert', secret: { secretName: webhookSecretName } }],
          },
        },
      },
    },
  ];
}

/** Every object `management install` applies for `providers`, in phases. */
export function renderManagement(providers: readonly ManagedProvider[], certs: WebhookCertificates): ManagementObjects {
  const namespaces = new Set(providers.map((p) => p.namespace));
  const out: ManagementObjects = { namespaces: [], crds: [], workloads: [], webhooks: [], inventory: [], deployments: [] };
  const core = providers.find((p) => p.provider === 'cluster-api');
  for (const p of providers) {
    const labels = commonLabels(p.provider);
    const cert = certs.serving.get(p.namespace);
    if (!cert) throw new Error(`no webhook serving certificate for namespace ${p.namespace}`);
    for (const obj of p.components) {
      if (obj.kind === 'Namespace') out.namespaces.push(withLabels(obj, labels));
      else if (obj.kind === 'CustomResourceDefinition') {
        const crd = withLabels(serviceWebhooks(obj, namespaces, certs.ca.certPem), labels);
        // clusterctl's inventory CRD carries the core label (inventory.go, createObj).
        out.crds.push(crd.metadata.name === 'providers.clusterctl.cluster.x-k8s.io' ? withLabels(crd, { [clusterctlCoreLabel]: 'inventory' }) : crd);
      } else if (isWebhookConfiguration(obj)) out.webhooks.push(withLabels(serviceWebhooks(obj, namespaces, certs.ca.certPem), labels));
      else if (obj.kind === 'ClusterRole') continue; // the manager's rules, bound under upstream's names (rbacObjects)
      else if (obj.kind === 'Provider') {
        // clusterctl's own labels on an inventory entry (repository/components.go, InventoryObject).
        out.inventory.push({ ...obj, metadata: { ...obj.metadata, labels: { ...labels, [clusterctlCoreLabel]: 'inventory' } }, version: p.version });
      } else {
        out.workloads.push(withLabels(obj, labels));
      }
    }
    if (!p.components.some((o) => o.kind === 'Namespace')) out.namespaces.push({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: p.namespace, labels } });
    out.workloads.push(...workloadObjects(p, cert, certs.ca.certPem));
    out.deployments.push({ namespace: p.namespace, name: deploymentName(p.provider), provider: p.provider });
  }
  if (core) {
    // The CA beside the core provider: a later `management install` signs renewed certificates with it, so caBundles stay.
    out.workloads.push({
      apiVersion: 'v1', kind: 'Secret', type: 'kubernetes.io/tls',
      metadata: { name: webhookCaSecretName, namespace: core.namespace, labels: commonLabels(core.provider) },
      data: { 'tls.crt': b64(certs.ca.certPem), 'tls.key': b64(certs.ca.keyPem) },
    });
  }
  return out;
}

/** Every object of a rendering in apply order. */
export function allObjects(objects: ManagementObjects): KubeObject[] {
  return [...objects.namespaces, ...objects.crds, ...objects.workloads, ...objects.webhooks, ...objects.inventory];
}

/** An inventory entry found in the cluster. */
export interface InstalledProvider {
  namespace: string;
  name: string;
  providerName: string;
  type: string;
  version: string;
}

/**
 * The installed providers that conflict with ours: the same provider (clusterctl's SameAs:
 * providerName and type) at another version or in another namespace. Empty: nothing to refuse.
 */
export function conflictingProviders(wanted: readonly ManagedProvider[], installed: readonly InstalledProvider[]): InstalledProvider[] {
  const ours = new Map<string, ManagedProvider>();
  for (const p of wanted) {
    const inventory = p.components.find((o) => o.kind === 'Provider') as (KubeObject & { providerName?: string; type?: string }) | undefined;
    if (inventory?.providerName && inventory.type) ours.set(`${inventory.type}/${inventory.providerName}`, p);
  }
  return installed.filter((i) => {
    const p = ours.get(`${i.type}/${i.providerName}`);
    return p !== undefined && (p.version !== i.version || p.namespace !== i.namespace);
  });
}

/**
 * The processes of a local control plane and their flags: etcd, kube-apiserver, and
 * one controller manager per bundled provider. Flags are defaults plus the caller's
 * overrides, rendered in a stable order (see process/args.ts). Every listener is on
 * loopback; providers bind their webhook and simulated-cluster servers to
 * PROVISIONER_BIND_ADDRESS, which the bundle build patched in (scripts/bundle/patches.ts).
 */
import { UsageError } from '../errors.js';
import type { ArgMap } from '../process/args.js';
import type { ControlPlanePki } from '../pki/index.js';

export const loopback = '127.0.0.1';

export interface EtcdPorts {
  client: number;
  peer: number;
  metrics: number;
}

export function etcdArgs(pki: ControlPlanePki, dataDir: string, ports: EtcdPorts, overrides: ArgMap = {}): ArgMap {
  const client = `https://${loopback}:${ports.client}`;
  const peer = `http://${loopback}:${ports.peer}`;
  return {
    name: 'provisioner',
    'data-dir': dataDir,
    'listen-client-urls': client,
    'advertise-client-urls': client,
    // One member, never joined by another: the peer listener only has to exist, on loopback.
    'listen-peer-urls': peer,
    'initial-advertise-peer-urls': peer,
    'initial-cluster': `provisioner=${peer}`,
    'listen-metrics-urls': `http://${loopback}:${ports.metrics}`,
    'cert-file': pki.etcdServer.certFile,
    'key-file': pki.etcdServer.keyFile,
    'trusted-ca-file': pki.etcdCa.certFile,
    'client-cert-auth': true,
    // fsync stays on (no --unsafe-no-fsync): destroy, gather and resume restart from this data.
    'log-level': 'warn',
    ...overrides,
  };
}

export interface ApiServerPorts {
  secure: number;
}

/**
 * The built-in API groups the API server serves; every other one (apps, batch, policy,
 * storage, scheduling, node, autoscaling, certificates, resource, ...) is off. Nothing
 * here runs Pods or their controllers: the providers' managers, clusterctl and this CLI
 * use core objects (Secrets, ConfigMaps, Namespaces, Events), events.k8s.io, RBAC,
 * leases, CRDs, webhook configurations and the token and access reviews. The API server
 * itself needs networking.k8s.io (its Service IP allocator) and discovery.k8s.io, and
 * flowcontrol.apiserver.k8s.io while priority and fairness is on.
 */
const servedApiGroups: readonly string[] = [
  'api/v1',
  'admissionregistration.k8s.io/v1',
  'apiextensions.k8s.io/v1',
  'apiregistration.k8s.io/v1',
  'authentication.k8s.io/v1',
  'authorization.k8s.io/v1',
  'coordination.k8s.io/v1',
  'discovery.k8s.io/v1',
  'events.k8s.io/v1',
  'flowcontrol.apiserver.k8s.io/v1',
  'networking.k8s.io/v1',
  'rbac.authorization.k8s.io/v1',
];

/**
 * Admission plugins on by default that only act on what this control plane never has
 * (Pods, PersistentVolumeClaims, Ingresses, CertificateSigningRequests, quotas, ...) or
 * that read the groups it does not serve. What stays: NamespaceLifecycle and the
 * webhook plugins, through which the providers validate and default their objects.
 */
const disabledAdmissionPlugins: readonly string[] = [
  'CertificateApproval',
  'CertificateSigning',
  'CertificateSubjectRestriction',
  'ClusterTrustBundleAttest',
  'DefaultIngressClass',
  'DefaultStorageClass',
  'DefaultTolerationSeconds',
  'JobValidation',
  'LimitRanger',
  'MutatingAdmissionPolicy',
  'NodeDeclaredFeatureValidator',
  'PersistentVolumeClaimResize',
  'PodGroupProtection',
  'PodGroupWorkloadExists',
  'PodResizeValidator',
  'PodSecurity',
  'PodTopologyLabels',
  'Priority',
  'ResourceQuota',
  'RuntimeClass',
  'ServiceAccount',
  'StorageObjectInUseProtection',
  'TaintNodesByCondition',
  'ValidatingAdmissionPolicy',
];

export function apiServerArgs(pki: ControlPlanePki, etcdClientPort: number, ports: ApiServerPorts, overrides: ArgMap = {}): ArgMap {
  return {
    'etcd-servers': `https://${loopback}:${etcdClientPort}`,
    'etcd-cafile': pki.etcdCa.certFile,
    'etcd-certfile': pki.apiServerEtcdClient.certFile,
    'etcd-keyfile': pki.apiServerEtcdClient.keyFile,
    'bind-address': loopback,
    'advertise-address': loopback,
    'secure-port': ports.secure,
    'tls-cert-file': pki.apiServer.certFile,
    'tls-private-key-file': pki.apiServer.keyFile,
    'client-ca-file': pki.ca.certFile,
    'authorization-mode': 'RBAC',
    'service-account-issuer': `https://${loopback}:${ports.secure}`,
    'service-account-key-file': pki.serviceAccount.publicKeyFile,
    'service-account-signing-key-file': pki.serviceAccount.privateKeyFile,
    'service-cluster-ip-range': '10.0.0.0/24',
    'allow-privileged': true,
    profiling: false,
    // The `kubernetes` Service cannot have a loopback endpoint, and nothing here needs it.
    'endpoint-reconciler-type': 'none',
    'cert-dir': `${pki.dir}/apiserver-generated`,
    // Only the groups and admission plugins a management cluster uses (see above); with
    // the Go settings of goRuntimeEnv, what keeps the footprint down (docs/architecture.md, "Footprint").
    'runtime-config': ['api/all=false', ...servedApiGroups.map((group) => `${group}=true`)].join(','),
    'disable-admission-plugins': disabledAdmissionPlugins.join(','),
    // No watch cache for CRDs: its event buffer kept every version of every CRD the install
    // wrote (created, NamesAccepted, Established: large objects) for as long as the process
    // ran, 13 MB of kube-apiserver's 228 (docs/benchmarks.md, "Settings measured"). Their
    // few watchers (the API server's own CRD controllers, the managers' CRD migrator, the
    // CLI's wait for Established) read etcd instead.
    'watch-cache-sizes': 'customresourcedefinitions.apiextensions.k8s.io#0',
    ...overrides,
  };
}

export interface ControllerPorts {
  webhook: number;
  health: number;
  diagnostics: number;
}

export function controllerArgs(kubeconfig: string, webhookCertDir: string, ports: ControllerPorts, featureGates: Record<string, boolean> = {}, overrides: ArgMap = {}): ArgMap {
  const gates = Object.entries(featureGates).sort(([a], [b]) => a.localeCompare(b)).map(([k, v]) => `${k}=${v}`).join(',');
  return {
    kubeconfig,
    'webhook-port': ports.webhook,
    'webhook-cert-dir': webhookCertDir,
    'health-addr': `${loopback}:${ports.health}`,
    // Metrics over plain http, on loopback only; nothing outside this machine can reach it.
    'diagnostics-address': `${loopback}:${ports.diagnostics}`,
    'insecure-diagnostics': true,
    // One instance per control plane: leader election would only add a lease round-trip to every start.
    'leader-elect': false,
    ...(gates ? { 'feature-gates': gates } : {}),
    ...overrides,
  };
}

export interface ForwarderPorts {
  /** Port on the extra listen address (the API server's own port when it was free there). */
  listen: number;
  health: number;
  /** Port of the read-only artifacts file server on the listen address. Absent in ports of a start before it existed. */
  artifacts?: number;
}

/**
 * provisioner-forwarder's flags: listen on `address` (the one the user named, never a
 * wildcard) and copy TCP to the API server on loopback; health on loopback, like the managers'.
 * With `artifacts`, also serve that directory read-only over HTTP on a second port of the same address.
 */
export function forwarderArgs(listen: string, apiServerPort: number, ports: ForwarderPorts, artifacts?: { listen: string; dir: string }): ArgMap {
  return {
    listen,
    target: `${loopback}:${apiServerPort}`,
    'health-addr': `${loopback}:${ports.health}`,
    ...(artifacts ? { 'artifacts-listen': artifacts.listen, 'artifacts-dir': artifacts.dir } : {}),
  };
}

/** Environment every provider controller gets on top of the allow-list; a platform adds its controllers' own (ProviderSpec.env). */
export function controllerEnv(): Record<string, string> {
  return { PROVISIONER_BIND_ADDRESS: loopback };
}

/**
 * Environment of kube-apiserver on top of the allow-list: it builds and serves no OpenAPI v2
 * and no CRD OpenAPI documents (/openapi/v3 keeps the built-in groups, which kubectl needs to
 * validate on the server), about 45-65 MB less resident memory. The bundle build patched the
 * variable in (scripts/bundle/patches.ts, skipOpenApiV2Env); the same binary as a workload
 * cluster's API server (a node image) never has it set. See docs/architecture.md, "Footprint".
 */
export function apiServerEnv(): Record<string, string> {
  return { PROVISIONER_APISERVER_SKIP_OPENAPI_V2: 'true' };
}

/**
 * Go's garbage-collection target for every child of a control plane that outlives the command
 * (`management start`, the in-memory platform's): a new cycle once the heap grows 25 % over the
 * live heap (Go's default: 100 %), for the footprint of what stays running.
 */
const lastingGoGc = 25;
/**
 * Go's garbage-collection target for every child of a control plane that ends with the command
 * (`create cluster` on a platform whose machines live elsewhere, `destroy`, `gather`): Go's own
 * default. Its memory is freed when the command ends; its CPU is taken from the hosts' plans
 * and the controllers beside it while it runs (docs/benchmarks.md, "A temporary control plane at
 * Go's default GOGC").
 */
const temporaryGoGc = 100;

/** Whether a control plane outlives the command that starts it (a detached one does). */
export type ControlPlaneLifetime = 'lasting' | 'temporary';

/**
 * The environment variable that replaces the GOGC defaults: Go's GOGC for every control-plane
 * process, a whole percentage from 10 to 1000. Larger trades memory for CPU: at Go's 100,
 * kube-apiserver used 11-13 s of CPU in its first minute against 21 s, and held 555 MB
 * against 382 (docs/benchmarks.md, "Settings measured"). The test suite sets 100: on its
 * 2-core machine CPU is what runs out.
 */
export const controlPlaneGoGcEnv = 'PROVISIONER_CONTROL_PLANE_GOGC';

/**
 * Go runtime settings of every control-plane process (all are Go programs), under the
 * caller's environment. A lasting control plane gets GOGC=25, which keeps each heap near its
 * live size: kube-apiserver's resident memory dropped from 555 MB (Go's default) to 468 MB at
 * GOGC=50 and 382 MB at 25, for more CPU during the boot (12 s, 16 s, 21 s in its first minute)
 * and none once idle. A temporary one gets Go's default, 100: on `create cluster` for two hosts
 * its start took 1.2 s less and the registration commands printed 1.6 s earlier (medians of
 * three). No GOMEMLIMIT: kube-apiserver's live heap is 230-300 MB, and a limit under it made the
 * collector run without pause (26 s of CPU in 45 idle seconds at 200 MiB).
 * `$PROVISIONER_CONTROL_PLANE_GOGC` replaces either. See docs/architecture.md, "Footprint".
 */
export function goRuntimeEnv(lifetime: ControlPlaneLifetime, source: NodeJS.ProcessEnv = process.env): Record<string, string> {
  const fallback = lifetime === 'lasting' ? lastingGoGc : temporaryGoGc;
  const value = source[controlPlaneGoGcEnv]?.trim();
  if (!value) return { GOGC: String(fallback) };
  const percent = /^\d+$/.test(value) ? Number(value) : NaN;
  if (!(percent >= 10 && percent <= 1000)) {
    throw new UsageError(`${controlPlaneGoGcEnv} is ${JSON.stringify(value)}: not a garbage-collection target`, {
      hint: `Give a whole percentage from 10 to 1000 (Go's GOGC; when unset, ${lastingGoGc} for a control plane that outlives the command and ${temporaryGoGc} for one that ends with it), or unset it.`,
    });
  }
  return { GOGC: String(percent) };
}

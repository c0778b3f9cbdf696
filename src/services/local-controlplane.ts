/**
 * Builds a LocalControlPlane from the bundle: resolves (extracts, if needed) the binaries
 * of etcd, kube-apiserver and every bundled provider controller, and maps each provider's
 * component manifest. `management start` and `create cluster` share this.
 */
import { LocalControlPlane, controlPlaneStatus, type ProviderSpec } from '../controlplane/local-controlplane.js';
import { ensureBinaries } from '../embedded/cache.js';
import { loadCatalog } from '../embedded/catalog.js';
import { log, type EventSink } from '../events.js';
import { KubeClient } from '../kube/client.js';
import type { ProcessError } from '../process/errors.js';

export interface LocalControlPlaneRequest {
  dir: string;
  detached: boolean;
  sink: EventSink;
  signal: AbortSignal;
  onFatal?: (error: ProcessError) => void;
}

export async function prepareLocalControlPlane(request: LocalControlPlaneRequest): Promise<LocalControlPlane> {
  const catalog = await loadCatalog();
  const controllers = catalog.components.filter((c) => c.binary).map((c) => c.binary!);
  const binaries = await ensureBinaries(['etcd', 'kube-apiserver', ...controllers], { catalog, sink: request.sink, signal: request.signal });
  const providers: ProviderSpec[] = catalog.components.map((c) => ({
    provider: c.provider,
    namespace: c.namespace,
    componentsFile: catalog.componentsPath(c),
    ...(c.binary ? { binaryPath: binaries[c.binary]!, controller: c.binary } : {}),
  }));
  return new LocalControlPlane({
    dir: request.dir,
    etcdBinary: binaries.etcd!,
    apiServerBinary: binaries['kube-apiserver']!,
    providers,
    detached: request.detached,
    events: request.sink,
    signal: request.signal,
    ...(request.onFatal ? { onFatal: request.onFatal } : {}),
  });
}

/** A running local control plane this command can use, whether it started it or found it running. */
export interface AttachedControlPlane {
  client: KubeClient;
  kubeconfig: string;
  /** True when it was already running (a lasting one, or left up by an interrupted run) and was adopted. */
  adopted: boolean;
  /** Rejects when a controller crashed past its restart budget (never, for an adopted one). */
  fatal: Promise<never>;
  /** Stops what this command started; an adopted control plane is left running. */
  stop(): Promise<void>;
}

/**
 * Adopts the control plane of `dir` when every recorded process is running and healthy;
 * otherwise stops whatever is left of it and starts it (from its data, if any).
 */
export async function attachLocalControlPlane(request: LocalControlPlaneRequest): Promise<AttachedControlPlane> {
  const status = await controlPlaneStatus(request.dir);
  if (status.usable) {
    log(request.sink, 'info', `Using the control plane already running in ${status.layout.dir}`);
    const client = KubeClient.fromFile(status.layout.kubeconfig);
    return { client, kubeconfig: status.layout.kubeconfig, adopted: true, fatal: new Promise<never>(() => {}), stop: async () => client.close() };
  }
  let rejectFatal: (error: unknown) => void = () => {};
  const fatal = new Promise<never>((_, reject) => (rejectFatal = reject));
  fatal.catch(() => {}); // observed by the waits; never an unhandled rejection
  const controlPlane = await prepareLocalControlPlane({ ...request, onFatal: (error) => rejectFatal(error) });
  await controlPlane.start();
  return {
    client: controlPlane.kube,
    kubeconfig: controlPlane.kubeconfig,
    adopted: false,
    fatal,
    stop: () => controlPlane.stop(),
  };
}

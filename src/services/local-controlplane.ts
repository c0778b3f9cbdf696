/**
 * Builds a LocalControlPlane from the bundle: resolves (extracts, if needed) the binaries
 * of etcd, kube-apiserver and every bundled provider controller, and maps each provider's
 * component manifest. `management start` and `create cluster` share this.
 */
import { LocalControlPlane, type ProviderSpec } from '../controlplane/local-controlplane.js';
import { ensureBinaries } from '../embedded/cache.js';
import { loadCatalog } from '../embedded/catalog.js';
import type { EventSink } from '../events.js';
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

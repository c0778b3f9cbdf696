/**
 * `provisioner management start|stop|status`: a local management cluster that stays up
 * after the command returns — etcd, kube-apiserver and every bundled provider as
 * detached processes owned by the install directory. A docker-free stand-in for a kind
 * bootstrap cluster. `start` again after a reboot or a kill comes back with the same data.
 */
import { requestField } from '../errors.js';
import { controlPlaneLayout } from '../controlplane/layout.js';
import { hostPort } from '../controlplane/listen-address.js';
import { controlPlaneStatus, readListenRecord, stopRecordedControlPlane, type ProcessStatus } from '../controlplane/local-controlplane.js';
import { publishAgentServer } from '../pivot/agents.js';
import { log, type EventSink } from '../events.js';
import { acquireDirLock } from '../process/lock.js';
import { findStale } from '../process/pidfile.js';
import { platformNamed, sharedControllers, type ControllerRequirement } from '../platforms/index.js';
import { checkListenAddress, checkRunningListenAddress, prepareLocalControlPlane } from '../management/attach.js';
import { readInstallConfigOrProblem } from '../assets/install-config.js';
import { platformNameOf } from '../config/platform-section.js';

export interface ManagementRequest {
  dir: string;
  sink: EventSink;
  signal: AbortSignal;
}

export interface ManagementStartRequest extends ManagementRequest {
  /** The one address besides loopback where hosts reach the API server. Default none: loopback only. */
  listenAddress?: string;
  /**
   * `--platform`: run only the providers that platform's clusters need (its controllers, and
   * the agent provider, which registration, address pools and a pivot's agent hand-over share),
   * and install only their CRDs. Default: the platform of the install config in `dir`; without
   * a valid one, every bundled provider.
   */
  platform?: string;
}

const listenAddressFlag = requestField('listenAddress');
const platformFlag = requestField('platform');

export interface ManagementStartResult {
  kubeconfig: string;
  alreadyRunning: boolean;
  durationMs: number;
}

export async function startManagement(request: ManagementStartRequest): Promise<ManagementStartResult> {
  const started = performance.now();
  if (request.listenAddress) checkListenAddress(request.listenAddress, { flag: listenAddressFlag });
  const platform = request.platform ?? (await installPlatform(request));
  const controllers = platform ? managementControllers(platform) : undefined;
  // The one command that may start a new install directory.
  const lock = await acquireDirLock(request.dir, { command: 'management start', events: request.sink, createDir: true });
  try {
    const layout = controlPlaneLayout(request.dir);
    const status = await controlPlaneStatus(request.dir);
    if (status.usable) {
      if (request.listenAddress) await checkRunningListenAddress(request.dir, request.listenAddress, listenAddressFlag);
      log(request.sink, 'info', `The management cluster in ${layout.dir} is already running`);
      return { kubeconfig: layout.kubeconfig, alreadyRunning: true, durationMs: performance.now() - started };
    }
    const controlPlane = await prepareLocalControlPlane({ ...request, detached: true, listenAddressFrom: listenAddressFlag, ...(controllers ? { controllers } : {}) });
    await controlPlane.start();
    // Where hosts reach this cluster, for a pivot into it to hand the moved hosts' agents over.
    const listen = await readListenRecord(request.dir);
    if (listen) await publishAgentServer(controlPlane.kube, `https://${hostPort(listen.address, listen.port)}`);
    // Detached children keep running; only our client connections close.
    controlPlane.kube.close();
    return { kubeconfig: controlPlane.kubeconfig, alreadyRunning: false, durationMs: performance.now() - started };
  } finally {
    await lock.release();
  }
}

/**
 * The platform of the install config in `dir`, whose providers `management start` runs when
 * not told a platform; undefined (every bundled provider) without a valid install config.
 */
async function installPlatform(request: ManagementStartRequest): Promise<string | undefined> {
  const read = await readInstallConfigOrProblem({ dir: request.dir, sink: request.sink });
  if ('config' in read) {
    const name = platformNameOf(read.config);
    log(request.sink, 'info', `Running the providers of platform ${name}, the install config's (${platformFlag} names another)`);
    return name;
  }
  if (read.document !== undefined || read.unparsable) {
    log(request.sink, 'warn', `The install config in ${request.dir} is not valid, so every bundled provider runs (${platformFlag} names one platform): ${read.problem instanceof Error ? read.problem.message : String(read.problem)}`);
  }
  return undefined;
}

/** The controllers `management start --platform <name>` runs: the platform's, and the shared ones (the agent manager), each once. */
export function managementControllers(platform: string): ControllerRequirement[] {
  const byProvider = new Map<string, ControllerRequirement>();
  for (const requirement of [...platformNamed(platform).controllers, ...sharedControllers()]) if (!byProvider.has(requirement.provider)) byProvider.set(requirement.provider, requirement);
  return [...byProvider.values()];
}

export async function stopManagement(request: ManagementRequest): Promise<string[]> {
  const lock = await acquireDirLock(request.dir, { command: 'management stop', events: request.sink });
  try {
    const running = await findStale(controlPlaneLayout(request.dir).stateDir);
    if (running.length === 0) {
      log(request.sink, 'info', `Nothing is running in ${controlPlaneLayout(request.dir).dir}`);
      return [];
    }
    return await stopRecordedControlPlane(request.dir, request.sink);
  } finally {
    await lock.release();
  }
}

export async function managementStatus(dir: string): Promise<{ kubeconfig: string; processes: ProcessStatus[] }> {
  const { layout, processes } = await controlPlaneStatus(dir);
  return { kubeconfig: layout.kubeconfig, processes };
}

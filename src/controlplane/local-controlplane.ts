/**
 * A local control plane: etcd and kube-apiserver on loopback with generated PKI, every
 * bundled provider's CRDs and webhooks installed, and each provider's controller manager
 * supervised as a child process. `create cluster` runs one that lives as long as the CLI
 * (children die with it, even on SIGKILL); `management start` runs one detached, owned by
 * its install directory. Either way pidfiles with process start times let the next
 * command find and stop anything left behind.
 *
 * Start order: etcd → kube-apiserver → its forwarder (only with a listen address: the one
 * address besides loopback where hosts reach the API server) → CRDs (Established) →
 * controllers (health and webhook TLS) → webhook configurations and inventory. Stop order
 * is the reverse. A start
 * with `reconcile: false` stops after the API server: objects can be read, and nothing
 * reconciles them (what diagnostics need: they must not change what they diagnose).
 */
import { access, mkdir, readFile, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { EnvironmentError, InfrastructureError, InternalError, messageOf } from '../errors.js';
import { log, nullSink, type EventSink } from '../events.js';
import { KubeClient } from '../kube/client.js';
import { ensureControlPlanePki, writeKubeconfig, type ControlPlanePki } from '../pki/index.js';
import { renderArgs, type ArgMap } from '../process/args.js';
import { ProcessError } from '../process/errors.js';
import { writeFileAtomic } from '../files.js';
import { ManagedProcess } from '../process/managed-process.js';
import { findStale, isAlive, readPidfiles, stopFound, stopStale, type PidfileEntry } from '../process/pidfile.js';
import { allocatePort, isAddressInUse } from '../process/ports.js';
import { httpProbe, tcpTlsProbe, type ReadinessProbe } from '../process/probes.js';
import { Supervisor } from '../process/supervisor.js';
import { apiServerArgs, apiServerEnv, controllerArgs, controllerEnv, etcdArgs, forwarderArgs, goRuntimeEnv, loopback, type ForwarderPorts } from './components.js';
import { installCrds, installWebhooksAndInventory, loadComponents } from './install.js';
import { controllerProcesses, type ControllerProcess } from './controller-processes.js';
import { controlPlaneLayout, type ControlPlaneLayout } from './layout.js';
import { hostPort } from './listen-address.js';
import type { WebhookEndpoints } from './webhooks.js';
import { StageRunner, type Stage } from '../lifecycle/stages.js';

/** A provider whose controller runs locally, from the bundle catalog. */
export interface ProviderSpec {
  provider: string;
  namespace: string;
  /** Component manifest (CRDs, webhooks, inventory). */
  componentsFile: string;
  /** Controller binary path; absent for CRD-only components, and may be for a start with `reconcile: false`. */
  binaryPath?: string;
  /** Controller name (the bundled binary's name): process, log and cert names. Providers with the same one share its process. */
  controller?: string;
  /** The controller serves several providers and runs those its --providers flag names (capi-manager). Default false: it runs its one. */
  selectsProviders?: boolean;
  featureGates?: Record<string, boolean>;
  /** Extra flags of this controller (a platform's). Default none; LocalControlPlaneOptions.argOverrides win. */
  args?: ArgMap;
  /** Extra environment of this controller: a platform's settings, credentials files by path (never content). Default none. */
  env?: Readonly<Record<string, string>>;
}

export interface LocalControlPlaneOptions {
  /** Install directory. */
  dir: string;
  etcdBinary: string;
  apiServerBinary: string;
  providers: readonly ProviderSpec[];
  /** Outlive the CLI (a lasting management cluster). Default false: children die with the CLI. */
  detached?: boolean;
  /**
   * Start the providers' controllers, which reconcile every object they find, with the CRDs
   * and webhooks they serve. Default true. False: etcd and the API server only, for commands
   * that only read objects (gather bootstrap, destroy bootstrap); such a start is never
   * recorded as finished, so no later command adopts it as a whole control plane.
   */
  reconcile?: boolean;
  /**
   * The one address besides loopback the API server is reachable on, for hosts: served by a
   * forwarder process and named in the API server's certificate. Default none: loopback only.
   * The caller checks it is an address of this machine (listenAddressProblem).
   */
  listenAddress?: string;
  /** provisioner-forwarder's path; required with `listenAddress` in a start that reconciles. */
  forwarderBinary?: string;
  /** Extra flags per process name, e.g. `{ 'kube-apiserver': { v: 2 } }`. Default none. */
  argOverrides?: Record<string, ArgMap>;
  /**
   * The Go runtime settings every child gets (GOGC). Default: `goRuntimeEnv` for `detached`'s lifetime, read from the
   * environment once, when the control plane is built, so a bad value is refused before any stage.
   */
  goRuntime?: Record<string, string>;
  events?: EventSink;
  signal?: AbortSignal;
  /** Called when a controller crashed past its restart budget: the caller fails what it is doing. */
  onFatal?: (error: ProcessError) => void;
}

export interface Ports {
  etcd: { client: number; peer: number; metrics: number };
  apiServer: { secure: number };
  /** Only with a listen address. */
  forwarder?: ForwarderPorts;
  controllers: Record<string, { webhook: number; health: number; diagnostics: number }>;
}

/** Time limits of each stage of a start. */
const etcdStartTimeoutMs = 60_000;
const apiServerStartTimeoutMs = 120_000;
const controllerStartTimeoutMs = 120_000;
const forwarderStartTimeoutMs = 30_000;
/** Pause between readiness probes: short, since every component answers within seconds. */
const probeIntervalMs = 100;
/** Attempts when a port we picked was taken before the child could bind it. */
const portAttempts = 3;

/** Process names in start order; stop runs in reverse. */
export const etcdName = 'etcd';
export const apiServerName = 'kube-apiserver';
/** The API server's listener on the extra address (see LocalControlPlaneOptions.listenAddress). */
export const forwarderName = 'provisioner-forwarder';

/** Where hosts reach the API server: the listen address and its port (`<dir>/.provisioner/controlplane/listen.json`). */
export interface ListenRecord {
  address: string;
  port: number;
  /**
   * `http://<address>:<port>` of the forwarder's read-only file server of the artifacts directory
   * (layout.artifactsDir): a file `node/bin/kubelet` there is `<artifactsUrl>/node/bin/kubelet`.
   * Absent in records written before it existed.
   */
  artifactsUrl?: string;
}

export class LocalControlPlane {
  readonly layout: ControlPlaneLayout;
  private readonly events: EventSink;
  private readonly supervisor: Supervisor;
  private client: KubeClient | undefined;
  private pki: ControlPlanePki | undefined;
  private ports: Ports | undefined;
  /** Set by stopControllers, cleared when startControllers starts them again. */
  private controllersStopped = false;
  private adminCert: string | undefined;
  private adminKey: string | undefined;
  private readonly startAbort = new AbortController();
  /** The Go runtime settings every child gets (`options.goRuntime`, else by its lifetime). */
  readonly goRuntime: Record<string, string>;

  constructor(private readonly options: LocalControlPlaneOptions) {
    this.goRuntime = options.goRuntime ?? goRuntimeEnv(options.detached ? 'lasting' : 'temporary');
    this.layout = controlPlaneLayout(options.dir);
    this.events = options.events ?? nullSink;
    this.supervisor = new Supervisor({
      events: this.events,
      ...(options.onFatal ? { onFatal: options.onFatal } : {}),
      // Linked to the caller's signal only while starting: an interrupt then stops the
      // partial start. Once started, the caller decides (a detached one outlives Ctrl-C).
      signal: this.startAbort.signal,
    });
  }

  get kubeconfig(): string {
    return this.layout.kubeconfig;
  }

  /** Admin client of the running control plane. */
  get kube(): KubeClient {
    if (!this.client) throw new InfrastructureError('the local control plane is not running');
    return this.client;
  }

  /**
   * Starts everything, in order, reusing the data, PKI and (when free) ports of an earlier
   * start. Anything left running by an earlier command on this directory is stopped first.
   * On failure everything started is stopped again and the error names the component.
   */
  async start(): Promise<void> {
    const signal = this.options.signal;
    const forward = () => this.startAbort.abort(signal?.reason);
    if (signal?.aborted) forward();
    signal?.addEventListener('abort', forward, { once: true });
    try {
      await this.startInOrder();
    } finally {
      signal?.removeEventListener('abort', forward);
    }
  }

  private async startInOrder(): Promise<void> {
    const { layout, events } = this;
    const signal = this.options.signal;
    await mkdir(layout.stateDir, { recursive: true, mode: 0o700 });
    await mkdir(layout.logDir, { recursive: true, mode: 0o700 });
    await mkdir(layout.etcdDataDir, { recursive: true, mode: 0o700 });

    // Until this start finishes, what runs here is half a control plane: never "already running".
    await rm(layout.startedFile, { force: true });
    // Parsing the providers' manifests (about 4 MB of YAML) overlaps the etcd and API server boot.
    const componentsLoading = Promise.all(this.options.providers.map((p) => loadComponents(p.provider, p.namespace, p.componentsFile)));
    componentsLoading.catch(() => {}); // awaited below; a failure surfaces there
    const stale = await stopStaleInStopOrder(layout.stateDir, { events });
    if (stale.length > 0) log(events, 'warn', `Stopped ${stale.length} process(es) left running by an earlier command: ${stale.map((e) => e.name).join(', ')}`);

    // Every controller keeps its certificates and ports even in a start without them, so the next full start finds them.
    const controllers = controllerProcesses(this.options.providers);
    let pki!: ControlPlanePki;
    const ports = await this.choosePorts(controllers.map((c) => c.name));
    this.ports = ports;
    let endpoints!: WebhookEndpoints;
    const stages = new StageRunner({ sink: events, ...(signal ? { signal } : {}) });
    const reconcile = this.options.reconcile !== false;
    try {
      await stages.runAll(
        controlPlaneStartStages({ reconcile, listenAddress: this.options.listenAddress !== undefined }, {
          pki: async () => {
            pki = await ensureControlPlanePki(layout.pkiDir, {
              controllers: controllers.map((c) => c.name),
              ...(this.options.listenAddress ? { apiServerIps: [this.options.listenAddress] } : {}),
              events,
            });
            this.pki = pki;
          },
          etcd: () =>
            this.startWithPortRetry(etcdName, async () => {
              const args = etcdArgs(pki, layout.etcdDataDir, ports.etcd, this.options.argOverrides?.[etcdName]);
              return this.process(etcdName, this.options.etcdBinary, args, { client: ports.etcd.client, metrics: ports.etcd.metrics }, httpProbe(`http://${loopback}:${ports.etcd.metrics}/readyz`), etcdStartTimeoutMs);
            }, async () => {
              ports.etcd = { client: await allocatePort(), peer: await allocatePort(), metrics: await allocatePort() };
            }),
          'kube-apiserver': () => this.startApiServer(pki, ports, reconcile),
          forwarder: () => this.startForwarder(ports),
          crds: async () => {
            endpoints = this.webhookEndpoints(ports);
            const crds = await installCrds(this.kube, await componentsLoading, endpoints, pki.caCertPem, signal ? { signal } : {});
            log(events, 'debug', `${crds.length} CRDs established`);
          },
          controllers: async () => {
            for (const spec of controllers) await this.startController(spec, ports, pki);
          },
          webhooks: async () => {
            const components = await componentsLoading;
            // A controller retried on new ports (one was taken meanwhile) serves its webhooks elsewhere
            // than the CRDs' conversion webhooks say: point them, and the webhook configurations, there.
            const served = this.webhookEndpoints(ports);
            if ([...served].some(([namespace, { port }]) => endpoints.get(namespace)?.port !== port)) {
              log(events, 'info', 'Webhook ports changed while the controllers started; updating the CRDs\' conversion webhooks');
              await installCrds(this.kube, components, served, pki.caCertPem, signal ? { signal } : {});
            }
            await installWebhooksAndInventory(this.kube, components, served, pki.caCertPem, signal ? { signal } : {});
          },
        }),
      );
      if (!reconcile) return;
      await this.savePorts(ports);
      await writeFileAtomic(layout.startedFile, JSON.stringify({ startedAt: new Date().toISOString() }));
    } catch (error) {
      await this.stop().catch((stopError: unknown) => log(events, 'warn', `While stopping after a failed start: ${messageOf(stopError)}`));
      throw error;
    }
  }

  /**
   * kube-apiserver on loopback, then the admin kubeconfig and client of it and the ports saved.
   * A start that reconciles and has no listen address keeps no forwarder record.
   */
  private async startApiServer(pki: ControlPlanePki, ports: Ports, reconcile: boolean): Promise<void> {
    const { layout, events } = this;
    const caPem = pki.caCertPem;
    const adminCert = await readFile(pki.admin.certFile, 'utf8');
    const adminKey = await readFile(pki.admin.keyFile, 'utf8');
    this.adminCert = adminCert;
    this.adminKey = adminKey;
    await this.startWithPortRetry(apiServerName, async () => {
      const args = apiServerArgs(pki, ports.etcd.client, ports.apiServer, this.options.argOverrides?.[apiServerName]);
      const probe = httpProbe(`https://${loopback}:${ports.apiServer.secure}/readyz`, { ca: caPem, cert: adminCert, key: adminKey });
      return this.process(apiServerName, this.options.apiServerBinary, args, { secure: ports.apiServer.secure }, probe, apiServerStartTimeoutMs, apiServerEnv());
    }, async () => {
      ports.apiServer = { secure: await allocatePort() };
    });
    await mkdir(layout.kubeconfig.replace(/\/[^/]+$/, ''), { recursive: true, mode: 0o700 });
    await writeKubeconfig(layout.kubeconfig, {
      server: `https://${loopback}:${ports.apiServer.secure}`,
      caCertPem: caPem,
      clientCertPem: adminCert,
      clientKeyPem: adminKey,
      clusterName: 'provisioner-management',
      userName: 'provisioner-admin',
    });
    await this.savePorts(ports);
    this.client?.close();
    this.client = KubeClient.fromFile(layout.kubeconfig);
    if (!reconcile) {
      log(events, 'info', 'Started etcd and the API server only: no controller runs, so nothing reconciles what is read');
    } else if (!this.options.listenAddress) {
      delete ports.forwarder;
      await rm(layout.listenFile, { force: true });
    }
  }

  /** Stops every process in reverse order (controllers, API server, etcd); data stays. */
  async stop(): Promise<void> {
    this.client?.close();
    this.client = undefined;
    this.controllersStopped = false;
    await this.supervisor.stopAll();
  }

  /**
   * Stops the controllers (and with them the webhooks they serve); etcd, the API server and
   * the forwarder keep running. The start counts as unfinished from then on, so the next
   * command that needs this control plane starts it whole again.
   */
  async stopControllers(): Promise<void> {
    await rm(this.layout.startedFile, { force: true });
    await this.supervisor.stopSome((p) => !infrastructureNames.has(p.name), { graceMs: controllerFenceGraceMs });
    this.controllersStopped = true;
  }

  /**
   * Starts again the controllers `stopControllers` stopped, against the etcd and API server
   * that kept running, on their last ports when still free; when a port had to change, points
   * the CRDs' conversion webhooks and the webhook configurations there. The start counts as
   * finished again. A second or two where a whole start boots the API server and installs the
   * CRDs again (13-15 s with Cluster API's and the agent's managers on the 2-core CI machine).
   */
  async startControllers(): Promise<void> {
    const { ports, pki } = this;
    if (!this.client || !ports || !pki || !this.controllersStopped) throw new InternalError('startControllers: no controllers were stopped on a running control plane (start it, then stopControllers)');
    const signal = this.options.signal;
    const forward = () => this.startAbort.abort(signal?.reason);
    if (signal?.aborted) forward();
    signal?.addEventListener('abort', forward, { once: true });
    try {
      const before = this.webhookEndpoints(ports);
      const stages = new StageRunner({ sink: this.events, ...(signal ? { signal } : {}) });
      await stages.value('controlplane/controllers', async () => {
        for (const spec of controllerProcesses(this.options.providers)) await this.startController(spec, ports, pki);
      });
      this.controllersStopped = false;
      const served = this.webhookEndpoints(ports);
      if ([...served].some(([namespace, { port }]) => before.get(namespace)?.port !== port)) {
        log(this.events, 'info', 'Webhook ports changed while the controllers started again; updating the CRDs\' conversion webhooks and the webhook configurations');
        const components = await Promise.all(this.options.providers.map((p) => loadComponents(p.provider, p.namespace, p.componentsFile)));
        await installCrds(this.kube, components, served, pki.caCertPem, signal ? { signal } : {});
        await installWebhooksAndInventory(this.kube, components, served, pki.caCertPem, signal ? { signal } : {});
      }
      await this.savePorts(ports);
      await writeFileAtomic(this.layout.startedFile, JSON.stringify({ startedAt: new Date().toISOString() }));
    } finally {
      signal?.removeEventListener('abort', forward);
    }
  }

  /**
   * With a listen address: the forwarder on `<address>:<port>` to the loopback API server,
   * ready when its health endpoint answers and the API server answers through it; then the
   * address is recorded for `hosts registration-command` (the `forwarder` stage, only with a
   * listen address).
   */
  private async startForwarder(ports: Ports): Promise<void> {
    const address = this.options.listenAddress;
    if (!address) throw new InternalError(`${forwarderName}: started without a listen address`);
    const binary = this.options.forwarderBinary;
    if (!binary) throw new InternalError(`${forwarderName}: no binary to start (the control plane was prepared without it)`);
    const pki = this.pki!;
    // Served as it is: created empty here, filled by whoever prepares nodes.
    await mkdir(this.layout.artifactsDir, { recursive: true, mode: 0o700 });
    await this.startWithPortRetry(forwarderName, async () => {
      const p = ports.forwarder!;
      p.artifacts ??= await allocatePort();
      const health = httpProbe(`http://${loopback}:${p.health}/readyz`);
      // Through the forwarder, verified against the cluster CA for the listen address: proves the certificate names it.
      const through = httpProbe(`https://${hostPort(address, p.listen)}/readyz`, { ca: pki.caCertPem, cert: this.adminCert!, key: this.adminKey! });
      const probe: ReadinessProbe = async (s) => (await health(s)) && (await through(s));
      // Ready implies the file server listens too: the forwarder serves health only after binding it.
      const artifacts = { listen: hostPort(address, p.artifacts), dir: this.layout.artifactsDir };
      return this.process(forwarderName, binary, forwarderArgs(hostPort(address, p.listen), ports.apiServer.secure, p, artifacts), { ...p }, probe, forwarderStartTimeoutMs);
    }, async () => {
      ports.forwarder = { listen: await allocatePort(), health: await allocatePort(), artifacts: await allocatePort() };
    });
    const artifactsUrl = `http://${hostPort(address, ports.forwarder!.artifacts!)}`;
    await writeFileAtomic(this.layout.listenFile, JSON.stringify({ address, port: ports.forwarder!.listen, artifactsUrl } satisfies ListenRecord));
    log(this.events, 'info', `The API server is reachable for hosts on https://${hostPort(address, ports.forwarder!.listen)} (and on loopback); node artifacts on ${artifactsUrl}`);
  }

  private async startController(spec: ControllerProcess, ports: Ports, pki: ControlPlanePki): Promise<void> {
    const name = spec.name;
    if (!spec.binaryPath) throw new InternalError(`${name}: no binary to start (the control plane was prepared without controllers)`);
    await this.startWithPortRetry(name, async () => {
      const p = ports.controllers[name]!;
      const args = controllerArgs(this.layout.kubeconfig, pki.webhooks[name]!.certDir, p, spec.featureGates, { ...spec.args, ...this.options.argOverrides?.[name] });
      // Ready means both: the manager reports healthy and its webhook server completes a TLS
      // handshake, so the first apply never races a webhook that is not serving yet.
      const health = httpProbe(`http://${loopback}:${p.health}/readyz`);
      const webhook = tcpTlsProbe(loopback, p.webhook, { ca: pki.caCertPem });
      const probe: ReadinessProbe = async (s) => (await health(s)) && (await webhook(s));
      return this.process(name, spec.binaryPath!, args, { ...p }, probe, controllerStartTimeoutMs, { ...controllerEnv(), ...spec.env });
    }, async () => {
      ports.controllers[name] = { webhook: await allocatePort(), health: await allocatePort(), diagnostics: await allocatePort() };
    }, { retryEarlyExit: true });
  }

  private process(
    name: string,
    binary: string,
    args: ArgMap,
    ports: Record<string, number>,
    readiness: ReadinessProbe,
    startTimeoutMs: number,
    extraEnv: Record<string, string> = {},
  ): ManagedProcess {
    return new ManagedProcess({
      name,
      binary,
      args: renderArgs(args),
      env: { extra: { ...this.goRuntime, ...extraEnv } },
      cwd: this.layout.stateDir,
      logDir: this.layout.logDir,
      readiness,
      startTimeoutMs,
      probeIntervalMs,
      detached: this.options.detached ?? false,
      stateDir: this.layout.stateDir,
      ports,
      events: this.events,
    });
  }

  /**
   * Starts a process; when it failed because a port was taken meanwhile, picks new ports and tries again.
   * With `retryEarlyExit` (controllers), any exit before ready is tried again too: a manager
   * exits 1 when its first API calls time out on a loaded machine, and a second start finds
   * the API server answering. A manager that cannot start at all still fails, after the last attempt.
   */
  private async startWithPortRetry(
    name: string,
    build: () => Promise<ManagedProcess>,
    newPorts: () => Promise<void>,
    { retryEarlyExit = false }: { retryEarlyExit?: boolean } = {},
  ): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      const proc = await build();
      try {
        await this.supervisor.start([proc]);
        return;
      } catch (error) {
        if (attempt < portAttempts && isAddressInUse(error)) {
          log(this.events, 'warn', `${name}: a port was taken by another program; retrying on new ports`);
          await newPorts();
          continue;
        }
        if (attempt < portAttempts && retryEarlyExit && error instanceof ProcessError && error.reason === 'exited' && !this.options.signal?.aborted) {
          log(this.events, 'warn', `${name}: exited before it was ready (${error.logTail.at(-1) ?? 'no log line'}); starting it again`);
          await newPorts();
          continue;
        }
        throw error;
      }
    }
  }

  private webhookEndpoints(ports: Ports): WebhookEndpoints {
    const endpoints = new Map<string, { port: number }>();
    for (const spec of this.options.providers) {
      if (spec.controller) endpoints.set(spec.namespace, { port: ports.controllers[spec.controller]!.webhook });
    }
    return endpoints;
  }

  /** Last start's ports when they are still free (stable endpoints across restarts); new ones otherwise. */
  private async choosePorts(controllers: readonly string[]): Promise<Ports> {
    let previous: Partial<Ports> = {};
    try {
      previous = JSON.parse(await readFile(this.layout.portsFile, 'utf8')) as Partial<Ports>;
    } catch {
      // First start.
    }
    const reuse = async (port: number | undefined) => (port !== undefined && (await isPortFree(port)) ? port : allocatePort());
    const controllerPorts: Ports['controllers'] = {};
    for (const name of controllers) {
      const p = previous.controllers?.[name];
      controllerPorts[name] = { webhook: await reuse(p?.webhook), health: await reuse(p?.health), diagnostics: await reuse(p?.diagnostics) };
    }
    const apiServer = { secure: await reuse(previous.apiServer?.secure) };
    const address = this.options.listenAddress;
    // On the listen address, the API server's own port when it is free there: one port to remember.
    const forwarder = address
      ? {
          listen: (await isPortFree(previous.forwarder?.listen ?? apiServer.secure, address)) ? (previous.forwarder?.listen ?? apiServer.secure) : await allocatePort(),
          health: await reuse(previous.forwarder?.health),
          artifacts: previous.forwarder?.artifacts !== undefined && (await isPortFree(previous.forwarder.artifacts, address)) ? previous.forwarder.artifacts : await allocatePort(),
        }
      : undefined;
    return {
      etcd: { client: await reuse(previous.etcd?.client), peer: await reuse(previous.etcd?.peer), metrics: await reuse(previous.etcd?.metrics) },
      apiServer,
      ...(forwarder ? { forwarder } : {}),
      controllers: controllerPorts,
    };
  }

  private async savePorts(ports: Ports): Promise<void> {
    await writeFileAtomic(this.layout.portsFile, JSON.stringify(ports, null, 2));
  }
}

export type ControlPlaneStartStage = 'pki' | 'etcd' | 'kube-apiserver' | 'forwarder' | 'crds' | 'controllers' | 'webhooks';

/**
 * The start's declared stages, `controlplane/<name>`, in order (unjournaled: what a start finds
 * on disk — data, PKI, ports — is its resume). The forwarder only with a listen address; a
 * start that does not reconcile stops after the API server.
 */
export function controlPlaneStartStages(situation: { reconcile: boolean; listenAddress: boolean }, body: Record<ControlPlaneStartStage, () => Promise<unknown>>): Stage[] {
  const { reconcile } = situation;
  return [
    { name: 'controlplane/pki', run: body.pki },
    { name: 'controlplane/etcd', run: body.etcd },
    { name: 'controlplane/kube-apiserver', run: body['kube-apiserver'] },
    { name: 'controlplane/forwarder', when: reconcile && situation.listenAddress, run: body.forwarder },
    { name: 'controlplane/crds', when: reconcile, run: body.crds },
    { name: 'controlplane/controllers', when: reconcile, run: body.controllers },
    { name: 'controlplane/webhooks', when: reconcile, run: body.webhooks },
  ];
}

async function isPortFree(port: number, address = loopback): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen(port, address, () => server.close(() => resolve(true)));
  });
}

/** What `management status` shows for one recorded process. */
export interface ProcessStatus {
  name: string;
  pid: number;
  running: boolean;
  healthy: boolean | undefined;
  /** Why the health probe failed (its HTTP status and body, a refused connection, a timeout); absent when healthy or not running. */
  unhealthyReason?: string;
  ports: Record<string, number>;
  logFile: string;
  startedAt: string;
}

/** How long `management status` waits for one process's health endpoint before calling it unhealthy. */
const statusProbeTimeoutMs = 3000;

/**
 * Reads the pidfiles of a control plane and probes each running process's health. `usable`:
 * its last start finished and every recorded process runs and is healthy — a start killed
 * halfway (etcd and the API server up, no CRDs or controllers) is not.
 */
export async function controlPlaneStatus(dir: string): Promise<{ layout: ControlPlaneLayout; processes: ProcessStatus[]; usable: boolean }> {
  const layout = controlPlaneLayout(dir);
  const entries = await readPidfiles(layout.stateDir);
  const ca = await readFile(`${layout.pkiDir}/ca.crt`, 'utf8').catch(() => undefined);
  const adminCert = await readFile(`${layout.pkiDir}/admin.crt`, 'utf8').catch(() => undefined);
  const adminKey = await readFile(`${layout.pkiDir}/admin.key`, 'utf8').catch(() => undefined);
  const order = (e: PidfileEntry) => (e.name === etcdName ? 0 : e.name === apiServerName ? 1 : 2);
  const processes: ProcessStatus[] = [];
  for (const entry of [...entries].sort((a, b) => order(a) - order(b) || a.name.localeCompare(b.name))) {
    const running = isAlive(entry);
    let healthy: boolean | undefined;
    let unhealthyReason: string | undefined;
    if (running) {
      const probe =
        entry.name === etcdName ? httpProbe(`http://${loopback}:${entry.ports.metrics}/readyz`)
        : entry.name === apiServerName ? httpProbe(`https://${loopback}:${entry.ports.secure}/readyz`, { ...(ca ? { ca } : {}), ...(adminCert ? { cert: adminCert } : {}), ...(adminKey ? { key: adminKey } : {}) })
        : httpProbe(`http://${loopback}:${entry.ports.health}/readyz`);
      const deadline = AbortSignal.timeout(statusProbeTimeoutMs);
      try {
        healthy = await probe(deadline);
      } catch (error) {
        healthy = false;
        unhealthyReason = deadline.aborted ? `its health endpoint did not answer within ${statusProbeTimeoutMs / 1000} s` : error instanceof Error ? error.message : String(error);
      }
    }
    processes.push({
      name: entry.name,
      pid: entry.pid,
      running,
      healthy,
      ...(unhealthyReason ? { unhealthyReason } : {}),
      ports: entry.ports,
      logFile: entry.logFile,
      startedAt: entry.startedAt,
    });
  }
  const started = await access(layout.startedFile).then(() => true, () => false);
  return { layout, processes, usable: started && processes.length > 0 && processes.every((p) => p.running && p.healthy === true) };
}

/** Where hosts reach the API server of the control plane of `dir`, as its last full start recorded it; undefined: loopback only. */
export async function readListenRecord(dir: string): Promise<ListenRecord | undefined> {
  const text = await readFile(controlPlaneLayout(dir).listenFile, 'utf8').catch(() => undefined);
  if (text === undefined) return undefined;
  try {
    const record = JSON.parse(text) as Partial<ListenRecord>;
    if (typeof record.address !== 'string' || typeof record.port !== 'number') return undefined;
    return { address: record.address, port: record.port, ...(typeof record.artifactsUrl === 'string' ? { artifactsUrl: record.artifactsUrl } : {}) };
  } catch {
    // Written atomically by the start; unreadable means a start was cut short, which rewrites it.
    return undefined;
  }
}

/**
 * Grace after SIGTERM when controllers are stopped as a fence: none (SIGKILL at once). Their
 * in-flight work is a paused cluster's condition writes, which nobody needs finished, and a
 * manager with a burst of them in flight takes its whole 10 s grace to stop (measured at
 * 3+1,000 machines); the next start reconciles from scratch.
 */
const controllerFenceGraceMs = 0;

/**
 * Stops the processes a control plane's pidfiles record, whoever started them: the controllers
 * and the forwarder first, then the API server, then etcd. The order matters: an API server
 * whose etcd went first does not finish its shutdown and waits out the whole grace for SIGKILL.
 */
async function stopStaleInStopOrder(stateDir: string, options: { events?: EventSink } = {}): Promise<PidfileEntry[]> {
  const stopOrder: ((e: PidfileEntry) => boolean)[] = [(e) => e.name !== etcdName && e.name !== apiServerName, (e) => e.name === apiServerName, (e) => e.name === etcdName];
  const found = await findStale(stateDir);
  const stopped: PidfileEntry[] = [];
  for (const filter of stopOrder) stopped.push(...(await stopFound(stateDir, found, { ...options, filter })));
  return stopped;
}

/** The processes a control plane keeps when its controllers stop: what stores and serves the API. */
const infrastructureNames: ReadonlySet<string> = new Set([etcdName, apiServerName, forwarderName]);

/**
 * `LocalControlPlane.stopControllers` for a control plane another command started (found
 * through its pidfiles): its controllers stop, and its start counts as unfinished.
 */
export async function stopRecordedControllers(dir: string, events: EventSink = nullSink): Promise<void> {
  const layout = controlPlaneLayout(dir);
  await rm(layout.startedFile, { force: true });
  for (const entry of await stopStale(layout.stateDir, { filter: (e) => !infrastructureNames.has(e.name), graceMs: controllerFenceGraceMs })) log(events, 'debug', `Stopped ${entry.name} (pid ${entry.pid})`);
}

/**
 * Stops a control plane from its pidfiles, whoever started it: controllers first, then
 * the API server, then etcd. Returns the names stopped. Data stays.
 */
export async function stopRecordedControlPlane(dir: string, events: EventSink = nullSink): Promise<string[]> {
  const layout = controlPlaneLayout(dir);
  const running = await findStale(layout.stateDir);
  // Stopping is what was asked for here, so no "left running" warnings: one info line each.
  const stopped = (await stopStaleInStopOrder(layout.stateDir)).map((entry) => {
    log(events, 'info', `Stopped ${entry.name} (pid ${entry.pid})`);
    return entry.name;
  });
  if (running.length !== stopped.length) {
    throw new EnvironmentError(`Could not stop every process of the control plane in ${layout.dir}`, { hint: 'Look for them with `ps` and stop them by hand.' });
  }
  return stopped;
}

/** Stops the local control plane of `dir` (stopRecordedControlPlane) and removes its data and its admin kubeconfig. */
export async function removeRecordedControlPlane(dir: string, events: EventSink = nullSink): Promise<void> {
  const layout = controlPlaneLayout(dir);
  await stopRecordedControlPlane(dir, events);
  await rm(layout.stateDir, { recursive: true, force: true });
  await rm(layout.kubeconfig, { force: true });
}

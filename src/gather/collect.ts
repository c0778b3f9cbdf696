/**
 * The log bundle: one tar.gz with everything needed to diagnose a failed or stuck install,
 * and never a Secret's data, a token or a private key.
 *
 * Every file is written through the redactor into a private staging directory inside the
 * install dir, archived to a temp file (0600), then the archive itself is read back and
 * every line of every entry checked again (`findSecrets`): if anything that looks like a
 * private key, a token or a known Secret value survived, the archive is deleted and the
 * gather fails with an InternalError. Only then is it renamed into place.
 *
 * Never included: `.provisioner/controlplane/pki/`, etcd's data, `auth/` (kubeconfigs).
 */
import { randomBytes } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { chmod, mkdir, mkdtemp, readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { StringDecoder } from 'node:string_decoder';
import { pipeline } from 'node:stream/promises';
import * as tar from 'tar';
import { stringify } from 'yaml';
import { controlPlaneLayout } from '../controlplane/layout.js';
import { controlPlaneStatus } from '../controlplane/local-controlplane.js';
import { InternalError, InterruptedError, messageOf } from '../errors.js';
import { stateDirOf } from '../installdir/paths.js';
import { StageRunner, type Stage } from '../lifecycle/stages.js';
import { log, nullSink, type EventSink } from '../events.js';
import type { KubeClient, KubeObject } from '../kube/client.js';
import { cliVersion } from '../version.js';
import { formatTable } from '../text-table.js';
import { discoverKinds, type ServedKind } from './discovery.js';
import { createRedactStream, findSecrets, knownValuesPattern, redactObject, redactText, secretValuesToMatch, type Counts, type SecretKind } from './redact.js';

export interface GatherOptions {
  /** The install directory. */
  dir: string;
  /** A client of the running control plane, to gather CAPI objects, Events and Secret names. Default none: files only. */
  client?: KubeClient;
  /**
   * Where to write the bundle (an existing directory gets the default file name inside).
   * Default `<dir>/log-bundle-<UTC time>.tar.gz`.
   */
  output?: string;
  /** Default: events dropped. */
  events?: EventSink;
  signal?: AbortSignal;
  /** Lines for README.txt saying how the bundle was collected (e.g. "the control plane was started for this gather"). Default none. */
  notes?: readonly string[];
  /** The time in the bundle's name and README. Default: now. */
  now?: Date;
  /**
   * Credentials files of the install (a platform's, by path): every value in them is
   * redacted wherever it appears, and the archive is refused if one survives. Default none.
   */
  credentialFiles?: readonly string[];
}

export interface GatherResult {
  /** The bundle written (mode 0600). */
  path: string;
  /** Files in the bundle, README.txt included. */
  files: number;
  /** Size of the archive in bytes. */
  bytes: number;
  /** Values replaced by `[REDACTED]`, over all files. */
  redactions: number;
  /** CAPI objects gathered (0 without a client). */
  objects: number;
  /** What could not be gathered, and why; also in the bundle's errors.txt. */
  problems: string[];
}

/** One file written into the bundle. */
interface Entry {
  path: string;
  bytes: number;
  redactions: Counts;
  /** Where it came from, for README.txt. */
  source?: string;
}

/** How long the API server may take to answer /readyz before objects are skipped. */
const readyTimeoutMs = 10_000;
/** Findings of the verification pass listed in the error, at most. */
const maxFindingsShown = 20;

/** `20250102T030405Z`: sortable, and safe in file names. */
function bundleTimestamp(date: Date): string {
  return date.toISOString().replace(/[-:]/g, '').replace(/\.\d+Z$/, 'Z');
}

/** Builds the bundle; see the module comment. Throws InternalError when a secret survived redaction. */
export async function gatherBundle(options: GatherOptions): Promise<GatherResult> {
  const events = options.events ?? nullSink;
  const layout = controlPlaneLayout(options.dir);
  const now = options.now ?? new Date();
  const name = `log-bundle-${bundleTimestamp(now)}`;
  const output = await resolveOutput(options.output, layout.dir, `${name}.tar.gz`);
  const checkAbort = () => {
    if (options.signal?.aborted) throw new InterruptedError('gather was interrupted; no bundle was written', { hint: 'Run the same command again.' });
  };

  // Private staging (0700, inside the install dir so it is on the same disk and cleaned with it).
  const staging = await mkdtemp(path.join(layout.dir, '.log-bundle-'));
  const bundle = new BundleWriter(path.join(staging, name));
  const problems: string[] = [];
  const problem: Problem = (what, error) => {
    const text = `${what}: ${messageOf(error)}`;
    problems.push(text);
    log(events, 'warn', `Could not gather ${text}`);
  };
  let objects = 0;
  const temp = path.join(path.dirname(output), `.${path.basename(output)}.${randomBytes(6).toString('hex')}.tmp`);
  try {
    await mkdir(bundle.root, { recursive: true, mode: 0o700 });

    // Secrets and credentials files first: their values are then replaced wherever they appear, logs included.
    const credentials = await credentialValues(options.credentialFiles ?? [], problem);
    bundle.knownValues = knownValuesPattern(credentials);
    let client = options.client;
    if (client && !(await isReady(client, problem))) client = undefined;
    const reader = client;
    // On the one runner without the signal: the gather stops at its own checkpoints (checkAbort), and a bundle being archived is finished.
    await new StageRunner({ sink: events }).runAll(
      gatherStages(reader !== undefined, {
        secrets: async () => void (bundle.knownValues = knownValuesPattern([...credentials, ...(await writeSecretList(bundle, reader!, problem))])),
        files: async () => {
          checkAbort();
          await gatherFiles(bundle, options.dir, problem);
          checkAbort();
        },
        objects: async () => {
          objects = await gatherObjects(bundle, reader!, problem, options.signal);
          checkAbort();
        },
        archive: async () => {
          if (problems.length > 0) await bundle.writeText('errors.txt', `${problems.join('\n')}\n`);
          await bundle.writeText('README.txt', readme({ name, dir: layout.dir, now, client: reader !== undefined, notes: options.notes ?? [], problems, entries: bundle.entries }));
          checkAbort();
          await pipeline(tar.c({ gzip: true, cwd: staging, portable: true }, [name]), createWriteStream(temp, { mode: 0o600, flags: 'wx' }));
          await chmod(temp, 0o600);
        },
        verify: () => verifyArchive(temp, bundle.knownValues),
      }),
    );
    await rename(temp, output);
  } catch (error) {
    await rm(temp, { force: true });
    throw error;
  } finally {
    await rm(staging, { recursive: true, force: true });
  }
  const redactions = bundle.entries.reduce((sum, e) => sum + total(e.redactions), 0);
  const result: GatherResult = { path: output, files: bundle.entries.length, bytes: (await stat(output)).size, redactions, objects, problems };
  log(events, 'info', `Log bundle written: ${result.files} files, ${result.objects} objects, ${result.redactions} values redacted`, { path: output, bytes: result.bytes });
  return result;
}

async function resolveOutput(requested: string | undefined, dir: string, fileName: string): Promise<string> {
  if (requested === undefined) return path.join(dir, fileName);
  const resolved = path.resolve(requested);
  const existing = await stat(resolved).catch(() => undefined);
  if (existing?.isDirectory()) return path.join(resolved, fileName);
  await mkdir(path.dirname(resolved), { recursive: true });
  return resolved;
}

async function isReady(client: KubeClient, problem: Problem): Promise<boolean> {
  try {
    await client.raw('/readyz', readyTimeoutMs);
    return true;
  } catch (error) {
    problem(`cluster objects (the API server at ${client.server} is not ready)`, error);
    return false;
  }
}

// ---------------------------------------------------------------------------------------
// Writing

/** Writes files under the bundle root, every byte through the redactor, 0600. */
class BundleWriter {
  readonly entries: Entry[] = [];
  knownValues: RegExp | undefined;

  constructor(readonly root: string) {}

  async writeText(relative: string, text: string, source?: string): Promise<void> {
    const { text: clean, counts } = redactText(text, this.redactorOptions());
    const file = await this.prepare(relative);
    await writeFile(file, clean, { mode: 0o600, flag: 'wx' });
    this.entries.push({ path: relative, bytes: Buffer.byteLength(clean), redactions: counts, ...(source ? { source } : {}) });
  }

  /** Streams a file through the redactor (logs can be tens of MiB). */
  async copyFile(relative: string, source: string): Promise<void> {
    const file = await this.prepare(relative);
    const redact = createRedactStream(this.redactorOptions());
    const out = createWriteStream(file, { mode: 0o600, flags: 'wx' });
    await pipeline(createReadStream(source), redact, out);
    this.entries.push({ path: relative, bytes: out.bytesWritten, redactions: redact.redactor.counts, source });
  }

  async writeYaml(relative: string, docs: readonly unknown[]): Promise<void> {
    // lineWidth 0: never fold a long line, so every value stays on the line the redactor sees.
    await this.writeText(relative, docs.map((d) => stringify(d, { lineWidth: 0 })).join('---\n'));
  }

  async writeJson(relative: string, value: unknown, source?: string): Promise<void> {
    await this.writeText(relative, `${JSON.stringify(value, null, 2)}\n`, source);
  }

  private redactorOptions() {
    return this.knownValues ? { knownValues: this.knownValues } : {};
  }

  private async prepare(relative: string): Promise<string> {
    const file = path.join(this.root, relative);
    if (!file.startsWith(this.root + path.sep)) throw new InternalError(`bundle path ${relative} escapes the bundle`);
    await mkdir(path.dirname(file), { recursive: true, mode: 0o700 });
    return file;
  }
}

/** The bodies of a log bundle's stages, by stage. */
export interface GatherBodies {
  secrets: () => Promise<void>;
  files: () => Promise<void>;
  objects: () => Promise<void>;
  archive: () => Promise<void>;
  verify: () => Promise<void>;
}

/**
 * A log bundle, in order: the Secrets' names and values to redact (with a client that
 * answers), the install directory's files, the objects (with that client), the archive
 * (README and errors.txt first), its check for anything that should have been redacted.
 */
export function gatherStages(withObjects: boolean, body: GatherBodies): Stage[] {
  return [
    { name: 'gather/secrets', when: withObjects, run: body.secrets },
    { name: 'gather/files', run: body.files },
    { name: 'gather/objects', when: withObjects, run: body.objects },
    { name: 'gather/archive', run: body.archive },
    { name: 'gather/verify', run: body.verify },
  ];
}

function total(counts: Counts): number {
  return Object.values(counts).reduce((a, b) => a + b, 0);
}

// ---------------------------------------------------------------------------------------
// Files of the install directory

const logFile = /\.log(\.\d+)?$/;

/** Regular files directly in `dir` whose names pass `accept`, sorted; none when `dir` is missing. */
async function filesIn(dir: string, accept: (name: string) => boolean): Promise<string[]> {
  const entries = await readdir(dir, { withFileTypes: true }).catch((error: NodeJS.ErrnoException) => {
    if (error.code === 'ENOENT') return [];
    throw error;
  });
  return entries.filter((e) => e.isFile() && accept(e.name)).map((e) => e.name).sort();
}

async function gatherFiles(bundle: BundleWriter, dir: string, problem: Problem): Promise<void> {
  const layout = controlPlaneLayout(dir);
  const copy = async (relative: string, source: string) => {
    try {
      await bundle.copyFile(relative, source);
    } catch (error) {
      problem(source, error);
    }
  };
  // One log per process of the local control plane, rotated ones too, and the CLI's debug log (provisioner.log).
  for (const name of await filesIn(layout.logDir, (n) => logFile.test(n))) await copy(`logs/${name}`, path.join(layout.logDir, name));
  // The output of each user hook (src/lifecycle/hooks.ts writes logs/hooks/<stage>-<n>.log): a failed hook's is the first thing to read.
  const hookLogs = path.join(layout.logDir, 'hooks');
  for (const name of await filesIn(hookLogs, (n) => logFile.test(n))) await copy(`logs/hooks/${name}`, path.join(hookLogs, name));
  // The installer's own state: journal, timings, asset state. Not recursive: pki/ and etcd/ stay out.
  const stateDir = stateDirOf(layout.dir);
  for (const name of await filesIn(stateDir, (n) => n.endsWith('.json'))) await copy(`state/${name}`, path.join(stateDir, name));
  // The control plane's ports and pidfiles, copied as they are before status reads (and prunes) them.
  for (const name of await filesIn(layout.stateDir, (n) => n === 'ports.json')) await copy(`controlplane/${name}`, path.join(layout.stateDir, name));
  const pids = path.join(layout.stateDir, 'pids');
  for (const name of await filesIn(pids, (n) => n.endsWith('.json'))) await copy(`controlplane/pids/${name}`, path.join(pids, name));
  try {
    const { processes } = await controlPlaneStatus(dir);
    await bundle.writeJson('processes.json', processes);
  } catch (error) {
    problem('process status', error);
  }
  // What the install was asked to do: the install config and the (possibly edited) manifests.
  for (const name of await filesIn(layout.dir, (n) => n === 'install-config.yaml')) await copy(`config/${name}`, path.join(layout.dir, name));
  const manifests = path.join(layout.dir, 'cluster-api');
  for (const name of await filesIn(manifests, (n) => /\.ya?ml$/.test(n))) await copy(`config/cluster-api/${name}`, path.join(manifests, name));
}

// ---------------------------------------------------------------------------------------
// Objects of the control plane

interface Condition {
  type?: string;
  status?: string;
  reason?: string;
  message?: string;
  lastTransitionTime?: string;
}

type Problem = (what: string, error: unknown) => void;

const byNamespacedName = (a: KubeObject, b: KubeObject) =>
  (a.metadata.namespace ?? '').localeCompare(b.metadata.namespace ?? '') || a.metadata.name.localeCompare(b.metadata.name);

/** Shortest value of a credentials file that is redacted (shorter ones would match ordinary words). */
const minCredentialValueLength = 8;

/**
 * The values of credentials files (`key: value` YAML, `key = value` INI lines; comments and
 * section headers skipped), for the redactor. A file that cannot be read is a problem: its
 * values cannot be looked for.
 */
async function credentialValues(files: readonly string[], problem: Problem): Promise<string[]> {
  const values: string[] = [];
  for (const file of files) {
    let text: string;
    try {
      text = await readFile(file, 'utf8');
    } catch (error) {
      problem(`the credentials file ${file} (its values cannot be redacted)`, error);
      continue;
    }
    for (const line of text.split(/\r?\n/)) {
      const match = /^\s*[^#;[\s][^:=]*[:=]\s*(.*?)\s*$/.exec(line);
      const value = match?.[1]?.replace(/^(["'])(.*)\1$/, '$2');
      if (value && value.length >= minCredentialValueLength) values.push(value);
    }
  }
  return values;
}

/** Lists Secrets, writes their names, types and keys (never values); returns their values for the redactor. */
async function writeSecretList(bundle: BundleWriter, client: KubeClient, problem: Problem): Promise<string[]> {
  let secrets: (KubeObject & { type?: string; data?: Record<string, string> })[];
  try {
    secrets = await client.list('v1', 'Secret');
  } catch (error) {
    problem('the list of Secrets', error);
    return [];
  }
  secrets.sort(byNamespacedName);
  const values = secrets.flatMap((s) => secretValuesToMatch(s.data));
  const rows = secrets.map((s) => [
    s.metadata.namespace ?? '',
    s.metadata.name,
    s.type ?? '',
    Object.keys(s.data ?? {}).sort().join(',') || '-',
    (s.metadata.ownerReferences ?? []).map((o) => `${o.kind}/${o.name}`).join(',') || '-',
  ]);
  const header = 'Secrets of the control plane: names, types and data keys only; values are never gathered.\n\n';
  await bundle.writeText('resources/secrets.txt', header + textTable(['NAMESPACE', 'NAME', 'TYPE', 'KEYS', 'OWNERS'], rows));
  return values;
}

async function gatherObjects(bundle: BundleWriter, client: KubeClient, problem: Problem, signal?: AbortSignal): Promise<number> {
  let kinds: ServedKind[] = [];
  try {
    kinds = await discoverKinds(client);
  } catch (error) {
    problem('API discovery of the Cluster API groups', error);
  }
  let count = 0;
  const statusBlocks: string[] = [];
  const machines: KubeObject[] = [];
  const all: KubeObject[] = [];
  for (const kind of kinds) {
    if (signal?.aborted) break;
    let items: KubeObject[];
    try {
      items = await client.list(kind.apiVersion, kind.kind);
    } catch (error) {
      problem(`${kind.kind} (${kind.apiVersion})`, error);
      continue;
    }
    if (items.length === 0) continue;
    items.sort(byNamespacedName);
    count += items.length;
    await bundle.writeYaml(`resources/${kind.group}/${kind.resource}.yaml`, items.map((o) => redactObject(o)));
    for (const item of items) statusBlocks.push(statusBlock(item));
    all.push(...items);
    if (kind.group === 'cluster.x-k8s.io' && kind.kind === 'Machine') machines.push(...items);
  }
  await bundle.writeText(
    'resources/status.txt',
    `Phase and conditions of every Cluster API object (${count}), from status.conditions.\n\n${statusBlocks.join('\n') || 'no Cluster API objects\n'}`,
  );
  await bundle.writeText('resources/machines.txt', machinesTable(machines));
  await bundle.writeText('resources/machines-infrastructure.txt', machinesInfrastructure(machines, all, await bundledLogs(bundle)));
  try {
    const events = (await client.list('v1', 'Event')) as EventObject[];
    events.sort((a, b) => eventTime(a).localeCompare(eventTime(b)));
    await bundle.writeYaml('resources/events.yaml', events.map((e) => redactObject(e)));
    await bundle.writeText('resources/events.txt', eventsTable(events));
  } catch (error) {
    problem('Events', error);
  }
  return count;
}

function statusBlock(obj: KubeObject): string {
  const status = (obj.status ?? {}) as { phase?: string; conditions?: Condition[] };
  const ns = obj.metadata.namespace ? `${obj.metadata.namespace}/` : '';
  const lines = [`${obj.kind} ${ns}${obj.metadata.name}${status.phase ? `  phase=${status.phase}` : ''}`];
  const conditions = Array.isArray(status.conditions) ? status.conditions : [];
  if (conditions.length === 0) lines.push('  (no conditions)');
  for (const c of conditions) {
    const head = `  ${c.type ?? '?'}=${c.status ?? '?'}${c.reason ? ` ${c.reason}` : ''}`;
    const message = (c.message ?? '').split('\n').filter((l) => l.trim() !== '');
    lines.push(message.length ? `${head}: ${message[0]}` : head, ...message.slice(1).map((l) => `      ${l}`));
  }
  return `${lines.join('\n')}\n`;
}

function machinesTable(machines: readonly KubeObject[]): string {
  const rows = machines.map((m) => {
    const spec = (m.spec ?? {}) as { clusterName?: string; providerID?: string };
    const status = (m.status ?? {}) as { phase?: string; nodeRef?: { name?: string }; addresses?: { type?: string; address?: string }[] };
    const addresses = (status.addresses ?? []).map((a) => `${a.type ?? '?'}=${a.address ?? '?'}`).join(' ');
    return [m.metadata.namespace ?? '', m.metadata.name, spec.clusterName ?? '', status.phase ?? '', status.nodeRef?.name ?? '-', spec.providerID ?? '-', addresses || '-'];
  });
  const header = 'Machines and their addresses (status.addresses), to reach the nodes of a stuck install.\n\n';
  return header + (rows.length ? textTable(['NAMESPACE', 'NAME', 'CLUSTER', 'PHASE', 'NODE', 'PROVIDER-ID', 'ADDRESSES'], rows) : 'no Machines\n');
}

/** The controller logs already in the bundle (redacted copies), by bundle path. */
async function bundledLogs(bundle: BundleWriter): Promise<Map<string, string[]>> {
  const logs = new Map<string, string[]>();
  const dir = path.join(bundle.root, 'logs');
  for (const name of await filesIn(dir, (n) => /\.log$/.test(n) && !/^(etcd|kube-apiserver|provisioner)\.log$/.test(n))) {
    logs.set(`logs/${name}`, (await readFile(path.join(dir, name), 'utf8')).split('\n'));
  }
  return logs;
}

/** Objects of `namespace` that `root` owns, through any chain of owner references (root included). */
function ownedTree(root: KubeObject, objects: readonly KubeObject[]): KubeObject[] {
  const tree = [root];
  for (let i = 0; i < tree.length; i++) {
    const owner = tree[i]!;
    for (const o of objects) {
      if (tree.includes(o) || o.metadata.namespace !== root.metadata.namespace) continue;
      if ((o.metadata.ownerReferences ?? []).some((r) => r.kind === owner.kind && r.name === owner.metadata.name)) tree.push(o);
    }
  }
  return tree;
}

/**
 * For each Machine, what its infrastructure provider last recorded of the infrastructure
 * it asked for, as far as the objects and logs show it: the infrastructure machine and the
 * objects it owns (a VM object, address claims), the latest condition of each (the
 * provider's last answer from the cloud, with its reason and message), failure fields, and
 * the provider log's last line naming one of them (the last call it logged). Platform
 * neutral: it follows spec.infrastructureRef and owner references only.
 */
function machinesInfrastructure(machines: readonly KubeObject[], objects: readonly KubeObject[], logs: Map<string, string[]>): string {
  const blocks = machines.map((m) => {
    const ref = ((m.spec ?? {}) as { infrastructureRef?: { kind?: string; name?: string } }).infrastructureRef;
    const lines = [`Machine ${m.metadata.namespace ?? ''}/${m.metadata.name}: infrastructure ${ref?.kind ?? '?'} ${ref?.name ?? '?'}`];
    const root = objects.find((o) => o.kind === ref?.kind && o.metadata.name === ref?.name && o.metadata.namespace === m.metadata.namespace);
    if (!root) {
      lines.push('  the infrastructure machine does not exist (not created yet, or deleted)');
      return lines.join('\n');
    }
    const tree = ownedTree(root, objects);
    let latest: { at: string; text: string } | undefined;
    for (const o of tree) {
      const status = (o.status ?? {}) as { conditions?: Condition[]; failureReason?: string; failureMessage?: string; ready?: boolean };
      const conditions = Array.isArray(status.conditions) ? status.conditions : [];
      const describe = (c: Condition) => `${c.type ?? '?'}=${c.status ?? '?'}${c.reason ? ` ${c.reason}` : ''}${c.message ? `: ${c.message.split('\n')[0]}` : ''}`;
      const notTrue = conditions.filter((c) => c.status !== 'True');
      lines.push(`  ${o.kind} ${o.metadata.name}: ${notTrue.length ? notTrue.map(describe).join('; ') : conditions.length ? 'every condition True' : 'no conditions'}`);
      if (status.failureReason || status.failureMessage) lines.push(`    failure: ${status.failureReason ?? ''} ${status.failureMessage ?? ''}`.trimEnd());
      for (const c of conditions) {
        if (c.lastTransitionTime && (!latest || c.lastTransitionTime >= latest.at)) latest = { at: c.lastTransitionTime, text: `${o.kind} ${o.metadata.name} ${describe(c)}` };
      }
    }
    lines.push(`  last answer recorded (latest condition change): ${latest ? `${latest.at} ${latest.text}` : 'none'}`);
    const names = tree.map((o) => o.metadata.name);
    let lastLine: { file: string; line: string } | undefined;
    let lastTime = '';
    for (const [file, fileLines] of logs) {
      for (let i = fileLines.length - 1; i >= 0; i--) {
        const line = fileLines[i]!;
        if (!names.some((n) => line.includes(n))) continue;
        // Lines of different logs are compared by their timestamp (JSON "ts" or klog's leading time), else the later file wins.
        const time = /"ts":"([^"]+)"/.exec(line)?.[1] ?? /^[IWEF](\d{4} \d{2}:\d{2}:\d{2}\.\d+)/.exec(line)?.[1] ?? '';
        if (!lastLine || time >= lastTime) {
          lastLine = { file, line: line.length > 2000 ? `${line.slice(0, 2000)}…` : line };
          lastTime = time;
        }
        break;
      }
    }
    lines.push(`  last provider log line naming it: ${lastLine ? `(${lastLine.file}) ${lastLine.line}` : 'none'}`);
    return lines.join('\n');
  });
  const header = 'Each Machine\'s infrastructure as its provider last recorded it: the objects it owns, their conditions not True,\n' +
    'the latest condition change (the last answer from the cloud the provider recorded) and the last provider log line naming them.\n\n';
  return header + (blocks.length ? `${blocks.join('\n\n')}\n` : 'no Machines\n');
}

interface EventObject extends KubeObject {
  type?: string;
  reason?: string;
  message?: string;
  count?: number;
  lastTimestamp?: string;
  eventTime?: string;
  firstTimestamp?: string;
  involvedObject?: { kind?: string; namespace?: string; name?: string };
  source?: { component?: string };
  reportingComponent?: string;
}

function eventTime(e: EventObject): string {
  return e.lastTimestamp ?? e.eventTime ?? e.firstTimestamp ?? e.metadata.creationTimestamp ?? '';
}

function eventsTable(events: readonly EventObject[]): string {
  const rows = events.map((e) => {
    const o = e.involvedObject ?? {};
    return [
      eventTime(e),
      e.type ?? '',
      e.reason ?? '',
      `${o.kind ?? '?'}/${o.namespace ? `${o.namespace}/` : ''}${o.name ?? '?'}`,
      e.source?.component || e.reportingComponent || '-',
      String(e.count ?? 1),
      (e.message ?? '').replace(/\s*\n\s*/g, ' | '),
    ];
  });
  return rows.length ? textTable(['TIME', 'TYPE', 'REASON', 'OBJECT', 'SOURCE', 'COUNT', 'MESSAGE'], rows) : 'no Events\n';
}

/** A table as gather's files hold it: lines, each ending in a newline. */
function textTable(header: readonly string[], rows: readonly (readonly string[])[]): string {
  return formatTable(header, rows).join('\n') + '\n';
}

// ---------------------------------------------------------------------------------------
// README

interface ReadmeInput {
  name: string;
  dir: string;
  now: Date;
  client: boolean;
  notes: readonly string[];
  problems: readonly string[];
  entries: readonly Entry[];
}

function readme(input: ReadmeInput): string {
  const files = input.entries.map((e) => {
    // `2 jwt`, not `jwt=2`: a `name=value` of a credential name would itself be redacted.
    const redactions = Object.entries(e.redactions).map(([k, v]) => `${v} ${k}`).join(', ');
    return [e.path, String(e.bytes), redactions || '-'];
  });
  return [
    `provisioner log bundle ${input.name}`,
    `provisioner ${cliVersion}, gathered ${input.now.toISOString()} from ${input.dir}`,
    '',
    ...(input.notes.length ? ['How it was gathered:', ...input.notes.map((n) => `  - ${n}`), ''] : []),
    'Layout:',
    '  logs/<process>.log[.1]      one log per process of the local control plane (etcd, kube-apiserver,',
    '                              each provider controller, provisioner-forwarder with a listen address);',
    '                              .1 is the previous, rotated part',
    '  logs/provisioner.log[.1]    the CLI\'s debug log: every event of every command on this install',
    '                              directory at debug level, one JSON object per line',
    '  logs/hooks/<stage>-<n>.log  output of each user hook that ran',
    '  state/                      the installer\'s state: journal.json (stages), timings, state.json',
    '                              (hashes of generated files)',
    '  controlplane/ports.json     ports of the last start of the local control plane',
    '  controlplane/pids/          one pidfile per process (pid, start time, ports, log file)',
    '  processes.json              each recorded process: running, healthy, ports, at gather time',
    '  config/                     install-config.yaml and the cluster-api/ manifests as on disk',
    ...(input.client
      ? [
          '  resources/<group>/<resource>.yaml   every Cluster API object, with status and conditions',
          '  resources/status.txt        phase and every condition of each Cluster API object',
          '  resources/machines.txt      Machines: phase, node, provider id and addresses',
          '  resources/machines-infrastructure.txt  each Machine\'s infrastructure objects: conditions, the last',
          '                              answer the provider recorded, its last log line naming them',
          '  resources/events.yaml/.txt  Events of all namespaces, oldest first',
          '  resources/secrets.txt       Secrets by name, type and data keys (never values)',
        ]
      : ['  (no resources/: no control plane was reachable, so no objects were gathered)']),
    ...(input.problems.length ? ['  errors.txt                  what could not be gathered, and why'] : []),
    '',
    'Never included: private keys and certificates of the control plane (pki/), etcd data, kubeconfigs',
    '(auth/), the data of any Secret. Every file passed through a redactor that replaces private keys,',
    'credential fields (tokens, passwords, client keys), bearer tokens, JWTs, bootstrap tokens, AWS keys,',
    'passwords in URLs, Secret data and the values of the platform\'s credentials files with [REDACTED];',
    'the archive was then checked again for any of them.',
    '',
    'Files (bytes, redactions by kind):',
    textTable(['FILE', 'BYTES', 'REDACTED'], files).trimEnd(),
    '',
  ].join('\n');
}

// ---------------------------------------------------------------------------------------
// Verification

interface Finding {
  path: string;
  line: number;
  kinds: SecretKind[];
}

/** Reads the archive back and fails when any line of any entry still holds a secret. */
export async function verifyArchive(file: string, knownValues?: RegExp): Promise<void> {
  const findings: Finding[] = [];
  const forbidden: string[] = [];
  await tar.t({
    file,
    onReadEntry: (entry) => {
      if (/(^|\/)(pki|etcd|auth)\//.test(entry.path)) forbidden.push(entry.path);
      if (entry.type !== 'File') return;
      const decoder = new StringDecoder('utf8');
      let partial = '';
      let lineNumber = 0;
      const check = (line: string) => {
        lineNumber++;
        const kinds = findSecrets(line, knownValues);
        if (kinds.length > 0) findings.push({ path: entry.path, line: lineNumber, kinds });
      };
      entry.on('data', (chunk: Buffer) => {
        const text = partial + decoder.write(chunk);
        let start = 0;
        for (let nl = text.indexOf('\n'); nl >= 0; nl = text.indexOf('\n', start)) {
          check(text.slice(start, nl));
          start = nl + 1;
        }
        partial = text.slice(start);
      });
      entry.on('end', () => {
        const rest = partial + decoder.end();
        if (rest !== '') check(rest);
      });
    },
  });
  if (findings.length === 0 && forbidden.length === 0) return;
  // Name where and what, never the value itself.
  const details = [
    ...forbidden.map((p) => `${p}: a path that must never be in a bundle`),
    ...findings.slice(0, maxFindingsShown).map((f) => `${f.path}:${f.line}: ${f.kinds.join(', ')}`),
    ...(findings.length > maxFindingsShown ? [`… and ${findings.length - maxFindingsShown} more`] : []),
  ];
  throw new InternalError(`the log bundle failed its final check: ${findings.length + forbidden.length} secret(s) survived redaction; the bundle was deleted`, {
    hint: 'This is a bug in provisioner\'s redaction: report it with the file names and kinds listed (not the files).',
    details,
  });
}

/**
 * The state behind the live view: every event folds into plain maps in O(1), so a
 * burst of thousands of object events costs little; the tree and the layout are only
 * built when a frame is drawn (at most every 100 ms, see renderer.tsx).
 */
import { atLeast, type LogEvent, type LogLevel, type ObjectEvent, type ProcessEvent, type ProgressEvent, type ProvisionerEvent, type StageEvent } from '../../../events.js';

export interface StageView {
  stage: string;
  state: StageEvent['state'];
  /** Clock time (ms) when it started, to show a running stage's elapsed time. */
  startedAt: number;
  durationMs?: number;
  message?: string;
}

/** A process as its last event left it (`logTail` kept from the last exit until it is ready again), with its restarts counted. */
export interface ProcessView extends Omit<ProcessEvent, 'type'> {
  restarts: number;
}

export interface ObjectView {
  key: string;
  kind: string;
  namespace?: string;
  name: string;
  phase?: string;
  ready: boolean;
  blocking?: ObjectEvent['blocking'];
  parent?: string;
  firstSeen: number;
  /** Clock time it became ready; elapsed time stops there. Cleared if it stops being ready. */
  readyAt?: number;
}

export interface ProgressView {
  task: string;
  label: string;
  current: number;
  total?: number;
  unit?: ProgressEvent['unit'];
}

export interface LogLine {
  level: LogLevel;
  text: string;
  /** How many times in a row it was logged; a repeated warning takes one line. */
  repeats?: number;
}

/** How many warn/error lines the live view shows, and how many the model keeps for the summary. */
export const visibleProblemLogs = 5;
const keptProblemLogs = 100;

export class LiveModel {
  readonly stages = new Map<string, StageView>();
  readonly processes = new Map<string, ProcessView>();
  readonly objects = new Map<string, ObjectView>();
  readonly progress = new Map<string, ProgressView>();
  /** Warn and error lines, oldest first, at most `keptProblemLogs`. */
  readonly problems: LogLine[] = [];
  droppedProblems = 0;
  lastInfo: LogLine | undefined;
  /** Bumped by every change that shows; lets the renderer skip identical frames. */
  version = 0;

  constructor(
    private readonly minLevel: LogLevel,
    private readonly now: () => number,
  ) {}

  /** Folds one event in. Results are not part of the view; the renderer writes them. */
  apply(event: ProvisionerEvent): void {
    switch (event.type) {
      case 'stage':
        return this.applyStage(event);
      case 'process':
        return this.applyProcess(event);
      case 'object':
        return this.applyObject(event);
      case 'progress':
        return this.applyProgress(event);
      case 'log':
        return this.applyLog(event);
      case 'result':
        return;
    }
  }

  private applyStage(e: StageEvent): void {
    const previous = this.stages.get(e.stage);
    const startedAt = e.state === 'started' || !previous ? this.now() - (e.durationMs ?? 0) : previous.startedAt;
    this.stages.set(e.stage, {
      stage: e.stage,
      state: e.state,
      startedAt,
      ...(e.durationMs !== undefined ? { durationMs: e.durationMs } : {}),
      ...(e.message ? { message: e.message } : {}),
    });
    this.version++;
  }

  private applyProcess(e: ProcessEvent): void {
    const previous = this.processes.get(e.name);
    const troubled = e.state === 'exited' || e.state === 'restarting' || e.state === 'failed';
    // Later events often omit what earlier ones said (pid, ports); keep the last known.
    const view: ProcessView = {
      name: e.name,
      state: e.state,
      restarts: (previous?.restarts ?? 0) + (e.state === 'restarting' ? 1 : 0),
    };
    const pid = e.pid ?? previous?.pid;
    if (pid !== undefined) view.pid = pid;
    const ports = e.ports ?? previous?.ports;
    if (ports) view.ports = ports;
    if (troubled) {
      const logTail = e.logTail?.length ? e.logTail : previous?.logTail;
      if (logTail) view.logTail = logTail;
      const exitCode = e.exitCode !== undefined ? e.exitCode : previous?.exitCode;
      if (exitCode !== undefined) view.exitCode = exitCode;
      const signal = e.signal !== undefined ? e.signal : previous?.signal;
      if (signal !== undefined) view.signal = signal;
      const logFile = e.logFile ?? previous?.logFile;
      if (logFile) view.logFile = logFile;
    }
    if (e.message) view.message = e.message;
    this.processes.set(e.name, view);
    this.version++;
  }

  private applyObject(e: ObjectEvent): void {
    const key = objectKey(e.kind, e.namespace, e.name);
    if (e.deleted) {
      if (this.objects.delete(key)) this.version++;
      return;
    }
    const previous = this.objects.get(key);
    if (previous && sameObjectState(previous, e)) return;
    const now = this.now();
    const view: ObjectView = {
      key,
      kind: e.kind,
      name: e.name,
      ready: e.ready,
      firstSeen: previous?.firstSeen ?? now,
    };
    if (e.namespace) view.namespace = e.namespace;
    if (e.phase) view.phase = e.phase;
    if (e.blocking) view.blocking = e.blocking;
    if (e.parent) view.parent = e.parent;
    if (e.ready) view.readyAt = previous?.readyAt ?? now;
    this.objects.set(key, view);
    this.version++;
  }

  private applyProgress(e: ProgressEvent): void {
    if (e.done) {
      if (this.progress.delete(e.task)) this.version++;
      return;
    }
    const view: ProgressView = { task: e.task, label: e.label, current: e.current };
    if (e.total !== undefined) view.total = e.total;
    if (e.unit) view.unit = e.unit;
    this.progress.set(e.task, view);
    this.version++;
  }

  private applyLog(e: LogEvent): void {
    if (!atLeast(e.level, this.minLevel)) return;
    const fields = e.fields ? ' ' + Object.entries(e.fields).map(([k, v]) => `${k}=${v}`).join(' ') : '';
    const line: LogLine = { level: e.level, text: `${e.message}${fields}` };
    if (e.level === 'warn' || e.level === 'error') {
      const previous = this.problems.at(-1);
      if (previous && previous.level === line.level && previous.text === line.text) {
        // Replaced, not mutated: the view memoizes on line objects.
        this.problems[this.problems.length - 1] = { ...previous, repeats: (previous.repeats ?? 1) + 1 };
        this.version++;
        return;
      }
      this.problems.push(line);
      if (this.problems.length > keptProblemLogs) {
        this.problems.shift();
        this.droppedProblems++;
      }
    } else {
      this.lastInfo = line;
    }
    this.version++;
  }

  /** Whether anything moves on screen (a spinner, a running clock), so frames must keep coming. */
  get animating(): boolean {
    for (const s of this.stages.values()) if (s.state === 'started') return true;
    for (const p of this.processes.values()) if (p.state === 'starting' || p.state === 'restarting') return true;
    if (this.progress.size > 0) return true;
    for (const o of this.objects.values()) if (!o.ready) return true;
    return false;
  }
}

function objectKey(kind: string, namespace: string | undefined, name: string): string {
  return `${kind}/${namespace ?? ''}/${name}`;
}

function sameObjectState(view: ObjectView, e: ObjectEvent): boolean {
  return (
    view.ready === e.ready &&
    view.phase === e.phase &&
    view.parent === e.parent &&
    view.blocking?.condition === e.blocking?.condition &&
    view.blocking?.reason === e.blocking?.reason &&
    view.blocking?.message === e.blocking?.message
  );
}

export interface TreeNode {
  object: ObjectView;
  children: TreeNode[];
}

/** The order siblings appear in: the control plane before the workers, machines last. */
const kindOrder: Record<string, number> = { Cluster: 0, KubeadmControlPlane: 1, MachineDeployment: 2, MachineSet: 3, MachinePool: 4, Machine: 5 };

// Code-unit order, not localeCompare: Kubernetes names are lowercase ASCII, and this
// runs over every object in every frame.
const byCodeUnits = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

function compareObjects(a: ObjectView, b: ObjectView): number {
  return (kindOrder[a.kind] ?? 9) - (kindOrder[b.kind] ?? 9) || byCodeUnits(a.kind, b.kind) || byCodeUnits(a.name, b.name);
}

/**
 * Objects as a forest: each object under its `parent` (`Kind/name`, looked up in the
 * object's own namespace first). Objects whose parent is unknown are roots, so nothing
 * is hidden while the parent has not been seen yet. Linear in the number of objects.
 */
export function buildTree(objects: Iterable<ObjectView>): TreeNode[] {
  const all = [...objects];
  const byRef = new Map<string, ObjectView[]>();
  for (const o of all) {
    const ref = `${o.kind}/${o.name}`;
    const list = byRef.get(ref);
    if (list) list.push(o);
    else byRef.set(ref, [o]);
  }
  const parentOf = new Map<string, string>();
  for (const o of all) {
    const candidates = o.parent ? byRef.get(o.parent) : undefined;
    const parent = candidates?.find((c) => c.namespace === o.namespace) ?? candidates?.[0];
    if (parent) parentOf.set(o.key, parent.key);
  }
  // A parent cycle (A under B under A, or A under itself) would hide all of it: the
  // link that closes the loop is dropped, so its object becomes a root.
  for (const o of all) {
    const seen = new Set<string>([o.key]);
    let child = o.key;
    for (let up = parentOf.get(child); up !== undefined; child = up, up = parentOf.get(up)) {
      if (seen.has(up)) {
        parentOf.delete(child);
        break;
      }
      seen.add(up);
    }
  }
  const nodes = new Map<string, TreeNode>(all.map((o) => [o.key, { object: o, children: [] }]));
  const roots: TreeNode[] = [];
  for (const o of all) {
    const node = nodes.get(o.key)!;
    const parentKey = parentOf.get(o.key);
    const parentNode = parentKey !== undefined ? nodes.get(parentKey) : undefined;
    if (parentNode) parentNode.children.push(node);
    else roots.push(node);
  }
  const sort = (list: TreeNode[]) => {
    list.sort((a, b) => compareObjects(a.object, b.object));
    for (const n of list) sort(n.children);
  };
  sort(roots);
  return roots;
}

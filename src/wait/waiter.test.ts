import { describe, expect, it, vi } from 'vitest';
import { InterruptedError, MachinesError, InfrastructureError, type ProvisionerError } from '../errors.js';
import { type ObjectEvent } from '../events.js';
import { RecordingSink } from '../../test/support/recording-sink.js';
import type { KubeClient, KubeObject, WatchPhase } from '../kube/client.js';
import { waitFor, type Snapshot, type Verdict, type WaitOptions } from './waiter.js';

const apiVersion = 'example.com/v1';
const kind = 'Thing';

interface FakeWatch {
  path: string;
  query: Record<string, unknown>;
  onEvent: (phase: WatchPhase, obj: KubeObject) => void;
  onDone: (error?: Error) => void;
  stopped: boolean;
}

/** The three KubeClient methods waitFor calls, with watches the test drives by hand. */
class FakeClient {
  /** What the next list returns. */
  listed: KubeObject[] = [];
  /** The collection's resourceVersion the next list reports. */
  listedVersion = '1';
  lists = 0;
  readonly watches: FakeWatch[] = [];

  listVersioned(): Promise<{ items: KubeObject[]; resourceVersion: string }> {
    this.lists += 1;
    return Promise.resolve({ items: this.listed.map((o) => structuredClone(o)), resourceVersion: this.listedVersion });
  }
  collectionPath(api: string, k: string, namespace?: string): Promise<string> {
    return Promise.resolve(`/apis/${api}/namespaces/${namespace ?? ''}/${k.toLowerCase()}s`);
  }
  watch(path: string, query: Record<string, unknown>, onEvent: FakeWatch['onEvent'], onDone: FakeWatch['onDone']): Promise<() => void> {
    const watch: FakeWatch = { path, query, onEvent, onDone, stopped: false };
    this.watches.push(watch);
    return Promise.resolve(() => {
      watch.stopped = true;
    });
  }
  /** The current (latest) watch; waits for it to be started. */
  async current(count = 1): Promise<FakeWatch> {
    await vi.waitFor(() => expect(this.watches.length).toBeGreaterThanOrEqual(count), { timeout: 5_000 });
    return this.watches[this.watches.length - 1]!;
  }
  /** waitFor only uses listVersioned/collectionPath/watch; a full KubeClient needs a server, so this fake stands in. */
  asKubeClient(): KubeClient {
    return this as unknown as KubeClient;
  }
}

function thing(name: string, phase: string, resourceVersion = '1'): KubeObject {
  return { apiVersion, kind, metadata: { name, namespace: 'ns', resourceVersion }, status: { phase } };
}

/** Done when every Thing is in phase Done, failed when one is Failed; shows each Thing's phase. */
function evaluate(snapshot: Snapshot): Verdict {
  const things = [...(snapshot.get(`${apiVersion}/${kind}`)?.values() ?? [])];
  const objects: ObjectEvent[] = things.map((t) => {
    const phase = (t.status as { phase: string }).phase;
    return { type: 'object', kind, namespace: 'ns', name: t.metadata.name, phase, ready: phase === 'Done' };
  });
  const failed = things.find((t) => (t.status as { phase: string }).phase === 'Failed');
  if (failed) return { state: 'failed', objects, error: new MachinesError(`${failed.metadata.name} failed`) };
  if (things.length > 0 && objects.every((o) => o.ready)) return { state: 'done', objects };
  return { state: 'waiting', objects };
}

function options(sink: RecordingSink, extra: Partial<WaitOptions> = {}): WaitOptions {
  return {
    what: 'things',
    kinds: [{ apiVersion, kind, namespace: 'ns' }],
    evaluate,
    noProgressTimeoutMs: 10_000,
    onStall: (last, stalledMs) => new InfrastructureError(`stalled ${stalledMs} ms with ${last.objects.length} objects`),
    events: sink,
    ...extra,
  };
}

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => {
      throw new Error('expected the wait to fail');
    },
    (error: unknown) => error,
  );
}

describe('waitFor', () => {
  it('lists, watches the kind collection, and resolves when a MODIFIED event makes the evaluator say done', async () => {
    const client = new FakeClient();
    client.listed = [thing('a', 'Pending')];
    const wait = waitFor(client.asKubeClient(), options(new RecordingSink()));
    const watch = await client.current();
    expect(watch.path).toBe('/apis/example.com/v1/namespaces/ns/things');
    watch.onEvent('MODIFIED', thing('a', 'Done', '2'));
    const verdict = await wait;
    expect(verdict.state).toBe('done');
    expect(verdict.objects).toEqual([{ type: 'object', kind, namespace: 'ns', name: 'a', phase: 'Done', ready: true }]);
    expect(watch.stopped).toBe(true);
  });

  it('resolves at once when the listed objects are already done', async () => {
    const client = new FakeClient();
    client.listed = [thing('a', 'Done')];
    await expect(waitFor(client.asKubeClient(), options(new RecordingSink()))).resolves.toMatchObject({ state: 'done' });
  });

  it("rejects at once with the evaluator's error on a failed verdict", async () => {
    const client = new FakeClient();
    client.listed = [thing('a', 'Pending'), thing('b', 'Pending')];
    const wait = waitFor(client.asKubeClient(), options(new RecordingSink()));
    const watch = await client.current();
    const started = Date.now();
    watch.onEvent('MODIFIED', thing('b', 'Failed', '2'));
    const error = await rejection(wait);
    expect(error).toBeInstanceOf(MachinesError);
    expect((error as Error).message).toBe('b failed');
    expect(Date.now() - started).toBeLessThan(1_000);
    expect(watch.stopped).toBe(true);
  });

  it("rejects with onStall's error when nothing changes for noProgressTimeoutMs", async () => {
    const client = new FakeClient();
    client.listed = [thing('a', 'Pending')];
    const onStall = vi.fn((last: Verdict, stalledMs: number): ProvisionerError => new InfrastructureError(`stalled ${stalledMs} ms on ${last.objects[0]?.name}`));
    const started = Date.now();
    const wait = waitFor(client.asKubeClient(), options(new RecordingSink(), { noProgressTimeoutMs: 200, onStall }));
    const watch = await client.current();
    // A change invisible to the user (resourceVersion only) is not progress.
    watch.onEvent('MODIFIED', thing('a', 'Pending', '2'));
    const error = await rejection(wait);
    expect(error).toBeInstanceOf(InfrastructureError);
    expect((error as Error).message).toMatch(/^stalled \d+ ms on a$/);
    expect(onStall).toHaveBeenCalledTimes(1);
    expect(onStall.mock.calls[0]?.[1]).toBeGreaterThanOrEqual(190);
    const took = Date.now() - started;
    expect(took).toBeGreaterThanOrEqual(190);
    expect(took).toBeLessThan(2_000);
    expect(watch.stopped).toBe(true);
  });

  it('does not stall while the visible state keeps changing', async () => {
    // Fake clocks: under load a real 100 ms timer can fire late enough to look like a stall.
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'] });
    try {
      const client = new FakeClient();
      client.listed = [thing('a', 'step-0')];
      const onStall = vi.fn((): ProvisionerError => new InfrastructureError('stalled'));
      let settled = false;
      const wait = waitFor(client.asKubeClient(), options(new RecordingSink(), { noProgressTimeoutMs: 200, onStall })).finally(() => (settled = true));
      await vi.advanceTimersByTimeAsync(0);
      const watch = client.watches[0];
      expect(watch).toBeDefined();
      // A change every 100 ms for 500 ms: more than twice the 200 ms no-progress timeout in total.
      for (let step = 1; step <= 5; step++) {
        await vi.advanceTimersByTimeAsync(100);
        expect(settled).toBe(false);
        watch?.onEvent('MODIFIED', thing('a', `step-${step}`, String(step + 1)));
      }
      await vi.advanceTimersByTimeAsync(150);
      expect(settled).toBe(false);
      watch?.onEvent('MODIFIED', thing('a', 'Done', '9'));
      await expect(wait).resolves.toMatchObject({ state: 'done' });
      expect(onStall).not.toHaveBeenCalled();
    } finally {
      vi.useRealTimers();
    }
  });

  it('stalls 200 ms after the last change, not 200 ms after the start', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'] });
    try {
      const client = new FakeClient();
      client.listed = [thing('a', 'step-0')];
      let settled = false;
      const wait = waitFor(client.asKubeClient(), options(new RecordingSink(), { noProgressTimeoutMs: 200 })).finally(() => (settled = true));
      const failure = rejection(wait);
      await vi.advanceTimersByTimeAsync(150);
      client.watches[0]?.onEvent('MODIFIED', thing('a', 'step-1', '2'));
      await vi.advanceTimersByTimeAsync(199);
      expect(settled).toBe(false);
      await vi.advanceTimersByTimeAsync(1);
      expect(settled).toBe(true);
      expect(((await failure) as Error).message).toBe('stalled 200 ms with 1 objects');
    } finally {
      vi.useRealTimers();
    }
  });

  it('watches from the resourceVersion of its list, so a deletion between the two is seen (the destroy wait that stalled on a gone Cluster)', async () => {
    const client = new FakeClient();
    client.listed = [thing('a', 'Pending')];
    client.listedVersion = '41';
    const gone = (snapshot: Snapshot): Verdict => ({ state: (snapshot.get(`${apiVersion}/${kind}`)?.size ?? 0) === 0 ? 'done' : 'waiting', objects: [] });
    const wait = waitFor(client.asKubeClient(), options(new RecordingSink(), { evaluate: gone }));
    const watch = await client.current();
    expect(watch.query).toMatchObject({ resourceVersion: '41' });
    // The server replays what happened after 41: here the deletion made while the watch was being set up.
    watch.onEvent('DELETED', thing('a', 'Pending', '42'));
    await expect(wait).resolves.toMatchObject({ state: 'done' });
  });

  it('after a watch ends, lists again and watches from the new resourceVersion', async () => {
    const client = new FakeClient();
    client.listed = [thing('a', 'Pending')];
    client.listedVersion = '7';
    const wait = waitFor(client.asKubeClient(), options(new RecordingSink()));
    const first = await client.current();
    expect(first.query).toMatchObject({ resourceVersion: '7' });
    client.listed = [thing('a', 'Done', '9')];
    client.listedVersion = '9';
    first.onDone(new Error('too old resource version: 7 (9)'));
    const second = await client.current(2);
    expect(second.query).toMatchObject({ resourceVersion: '9' });
    await expect(wait).resolves.toMatchObject({ state: 'done' });
  });

  it('a watch the server ends and restarts, with nothing changed, does not move the deadline', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'] });
    try {
      const client = new FakeClient();
      client.listed = [thing('a', 'Pending')];
      let settled = false;
      const wait = waitFor(client.asKubeClient(), options(new RecordingSink(), { noProgressTimeoutMs: 200 })).finally(() => (settled = true));
      const failure = rejection(wait);
      await vi.advanceTimersByTimeAsync(0);
      // Every 50 ms the server ends the watch; each restart lists the same object again (newer resourceVersion).
      for (let restart = 1; restart <= 3; restart++) {
        client.listed = [thing('a', 'Pending', String(restart + 1))];
        client.watches.at(-1)?.onDone();
        await vi.advanceTimersByTimeAsync(50);
      }
      expect(client.lists).toBe(4);
      await vi.advanceTimersByTimeAsync(50);
      expect(settled).toBe(true);
      expect(((await failure) as Error).message).toBe('stalled 200 ms with 1 objects');
    } finally {
      vi.useRealTimers();
    }
  });

  it("emits an object event only when an object's view changes", async () => {
    const client = new FakeClient();
    client.listed = [thing('a', 'Pending'), thing('b', 'Pending')];
    const sink = new RecordingSink();
    const wait = waitFor(client.asKubeClient(), options(sink));
    const watch = await client.current();
    await vi.waitFor(() => expect(sink.ofType('object')).toHaveLength(2), { timeout: 5_000 });
    watch.onEvent('MODIFIED', thing('a', 'Pending', '2')); // same view: nothing emitted
    watch.onEvent('MODIFIED', thing('b', 'Running', '2')); // b changed: one event
    expect(sink.ofType('object').map((o) => `${o.name}:${o.phase}`)).toEqual(['a:Pending', 'b:Pending', 'b:Running']);
    watch.onEvent('ADDED', thing('c', 'Done'));
    watch.onEvent('DELETED', thing('b', 'Running', '3'));
    watch.onEvent('MODIFIED', thing('a', 'Done', '3'));
    await wait;
    expect(sink.ofType('object').map((o) => `${o.name}:${o.phase}`)).toEqual(['a:Pending', 'b:Pending', 'b:Running', 'c:Done', 'a:Done']);
  });

  it('ignores BOOKMARK and ERROR events', async () => {
    const client = new FakeClient();
    client.listed = [thing('a', 'Pending')];
    const sink = new RecordingSink();
    const wait = waitFor(client.asKubeClient(), options(sink));
    const watch = await client.current();
    watch.onEvent('BOOKMARK', { apiVersion, kind, metadata: { name: '', resourceVersion: '5' } });
    watch.onEvent('ERROR', thing('a', 'Done'));
    expect(sink.ofType('object').map((o) => o.phase)).toEqual(['Pending']);
    watch.onEvent('MODIFIED', thing('a', 'Done', '6'));
    await expect(wait).resolves.toMatchObject({ state: 'done' });
  });

  it('restarts a watch that ends by listing again, replacing what it knew', async () => {
    const client = new FakeClient();
    client.listed = [thing('a', 'Pending'), thing('gone', 'Pending')];
    const sink = new RecordingSink();
    const wait = waitFor(client.asKubeClient(), options(sink));
    const first = await client.current(1);
    expect(client.lists).toBe(1);
    // While no watch runs, 'gone' is deleted and 'a' finishes: only a new list shows it.
    client.listed = [thing('a', 'Done', '7')];
    first.onDone();
    const second = await client.current(2);
    expect(second).not.toBe(first);
    expect(client.lists).toBe(2);
    // The fresh list is judged without waiting for another event, with 'gone' forgotten.
    const verdict = await wait;
    expect(verdict.objects.map((o) => o.name)).toEqual(['a']);
    expect(second.stopped).toBe(true);
  });

  it('fails when restarting the watch fails', async () => {
    const client = new FakeClient();
    client.listed = [thing('a', 'Pending')];
    const wait = waitFor(client.asKubeClient(), options(new RecordingSink()));
    const watch = await client.current();
    client.listVersioned = () => Promise.reject(new InfrastructureError('api server gone'));
    watch.onDone();
    await expect(wait).rejects.toThrow('api server gone');
  });

  it('rejects with InterruptedError on an already aborted signal, without listing', async () => {
    const client = new FakeClient();
    const controller = new AbortController();
    controller.abort();
    const error = await rejection(waitFor(client.asKubeClient(), options(new RecordingSink(), { signal: controller.signal })));
    expect(error).toBeInstanceOf(InterruptedError);
    expect((error as Error).message).toBe('Interrupted while waiting for things');
    expect(client.lists).toBe(0);
  });

  it('rejects with InterruptedError when the signal aborts during the wait, stopping the watch', async () => {
    const client = new FakeClient();
    client.listed = [thing('a', 'Pending')];
    const controller = new AbortController();
    const wait = waitFor(client.asKubeClient(), options(new RecordingSink(), { signal: controller.signal }));
    const watch = await client.current();
    controller.abort();
    expect(await rejection(wait)).toBeInstanceOf(InterruptedError);
    expect(watch.stopped).toBe(true);
  });

  it('fails at once when the fatal promise rejects', async () => {
    const client = new FakeClient();
    client.listed = [thing('a', 'Pending')];
    let crash: (error: Error) => void = () => undefined;
    const fatal = new Promise<never>((_resolve, reject) => (crash = reject));
    const wait = waitFor(client.asKubeClient(), options(new RecordingSink(), { fatal }));
    const watch = await client.current();
    const controllerCrashed = new InfrastructureError('capi-controller-manager crashed 5 times');
    crash(controllerCrashed);
    expect(await rejection(wait)).toBe(controllerCrashed);
    expect(watch.stopped).toBe(true);
  });

  it('fails with what the evaluator throws', async () => {
    const client = new FakeClient();
    client.listed = [thing('a', 'Pending')];
    const broken = new TypeError('bad object');
    const wait = waitFor(client.asKubeClient(), options(new RecordingSink(), { evaluate: () => { throw broken; } }));
    expect(await rejection(wait)).toBe(broken);
  });

  it('judges nothing until every kind is listed: a kind still being listed is unknown, not empty', async () => {
    // The first kind lists at once; the second kind's list is held until the test lets it go.
    const client = new FakeClient();
    client.listed = [thing('a', 'Pending')];
    let releaseOther: (list: { items: KubeObject[]; resourceVersion: string }) => void = () => undefined;
    const otherListed = new Promise<{ items: KubeObject[]; resourceVersion: string }>((resolve) => (releaseOther = resolve));
    const listThings = client.listVersioned.bind(client);
    client.listVersioned = (...args: unknown[]) => (args[1] === 'Other' ? otherListed : listThings());
    const gone = (snapshot: Snapshot): Verdict => ([...snapshot.values()].every((objects) => objects.size === 0) ? { state: 'done', objects: [] } : { state: 'waiting', objects: [] });
    let ended = false;
    const wait = waitFor(client.asKubeClient(), options(new RecordingSink(), { kinds: [{ apiVersion, kind, namespace: 'ns' }, { apiVersion, kind: 'Other', namespace: 'ns' }], evaluate: gone })).then((verdict) => {
      ended = true;
      return verdict;
    });
    const things = await client.current();
    things.onEvent('DELETED', thing('a', 'Pending'));
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(ended).toBe(false);
    releaseOther({ items: [thing('b', 'Pending')], resourceVersion: '1' });
    const other = await client.current(2);
    expect(ended).toBe(false);
    other.onEvent('DELETED', thing('b', 'Pending'));
    expect((await wait).state).toBe('done');
  });
});

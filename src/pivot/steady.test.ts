import type { ServerResponse } from 'node:http';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ExternalError } from '../errors.js';
import { TestApiServer } from '../../test/support/test-api-server.js';
import { untilSteady } from './steady.js';

const ok = (response: ServerResponse) => void response.writeHead(200, { 'content-type': 'text/plain' }).end('ok');
const notReady = (response: ServerResponse) => void response.writeHead(503, { 'content-type': 'text/plain' }).end('[-]etcd failed');

describe('untilSteady', () => {
  let source: TestApiServer;
  let target: TestApiServer;

  beforeAll(async () => {
    [source, target] = await Promise.all([TestApiServer.start(), TestApiServer.start()]);
  });
  afterAll(async () => {
    await Promise.all([source.close(), target.close()]);
  });
  beforeEach(() => {
    source.reset();
    target.reset();
    source.handler = (_request, response) => ok(response);
  });

  const servers = () => [
    { name: 'the local control plane', client: source.client },
    { name: 'the cluster', client: target.client },
  ];

  it('waits out a server that is not ready, then resolves once both answered every probe for the whole window', async () => {
    let probes = 0;
    target.handler = (_request, response) => (++probes <= 3 ? notReady(response) : ok(response));
    const started = Date.now();
    const steadyFor = await untilSteady(servers(), { steadyMs: 600 });
    expect(steadyFor).toBeGreaterThanOrEqual(600);
    // Three 503s, each seen as it is (no retry hides it), then a window of 600 ms.
    expect(probes).toBeGreaterThanOrEqual(4);
    expect(Date.now() - started).toBeGreaterThanOrEqual(600 + 3 * 250);
    expect(target.seen.every((r) => r === 'GET /readyz')).toBe(true);
  });

  it('starts the window again at every failed probe: a flapping server never counts as steady', async () => {
    let probes = 0;
    target.handler = (_request, response) => (++probes % 2 === 0 ? notReady(response) : ok(response));
    const outcome = await untilSteady(servers(), { steadyMs: 400, timeoutMs: 3_000 }).then(
      () => 'steady',
      (error: unknown) => error,
    );
    expect(outcome).toBeInstanceOf(ExternalError);
    expect((outcome as Error).message).toMatch(/within 3 s before the move \(last failed probe: the cluster: \/readyz: \[-\]etcd failed\)/);
    expect(probes).toBeGreaterThanOrEqual(8);
  });

  it('fails naming the server that does not answer, and what it answered', async () => {
    target.handler = (_request, response) => notReady(response);
    const error = await untilSteady(servers(), { steadyMs: 400, timeoutMs: 1_000 }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(ExternalError);
    expect((error as Error).message).toMatch(/did not answer steadily for 0.4 s within 1 s before the move \(last failed probe: the cluster: \/readyz: \[-\]etcd failed\)/);
    expect((error as ExternalError).hint).toContain('the move has not begun');
  });
});

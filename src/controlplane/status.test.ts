import { mkdtemp, rm } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { writePidfile, type PidfileEntry } from '../process/pidfile.js';
import { controlPlaneLayout } from './layout.js';
import { controlPlaneStatus } from './local-controlplane.js';

/** A /readyz that answers `status` with `body`, on a loopback port of its own. */
async function readyz(status: number, body: string): Promise<{ server: Server; port: number }> {
  const server = createServer((_req, res) => res.writeHead(status).end(body));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, port: (server.address() as { port: number }).port };
}

/** A pidfile entry for this test's own process (alive by definition), probed on `health`. */
function entry(name: string, health: number): PidfileEntry {
  return { name, pid: process.pid, startTime: null, binary: '/bin/true', argsHash: '', ports: { health }, logFile: `/logs/${name}.log`, detached: true, ownerPid: process.pid, startedAt: new Date().toISOString() };
}

describe('controlPlaneStatus', () => {
  const cleanups: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0)) await cleanup();
  });

  it("says why a running process is unhealthy: its probe's status and body, a refused connection, no answer in time", async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'status-'));
    cleanups.push(() => rm(dir, { recursive: true, force: true }));
    const failing = await readyz(500, '[-]webhook failed: not started\nreadyz check failed');
    const passing = await readyz(200, 'ok');
    const closed = await readyz(200, 'ok');
    // Accepts the connection and never answers: a stopped or starved process.
    const silent = createServer(() => undefined);
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    cleanups.push(() => new Promise((resolve) => { silent.closeAllConnections(); silent.close(() => resolve()); }));
    cleanups.push(() => new Promise((resolve) => failing.server.close(() => resolve())), () => new Promise((resolve) => passing.server.close(() => resolve())));
    await new Promise<void>((resolve) => closed.server.close(() => resolve()));
    const { stateDir } = controlPlaneLayout(dir);
    await writePidfile(stateDir, entry('capa-manager', failing.port));
    await writePidfile(stateDir, entry('capi-manager', passing.port));
    await writePidfile(stateDir, entry('capv-manager', closed.port));
    await writePidfile(stateDir, entry('agent-manager', (silent.address() as { port: number }).port));

    const { processes, usable } = await controlPlaneStatus(dir);
    const byName = Object.fromEntries(processes.map((p) => [p.name, p]));
    expect(byName['capa-manager']).toMatchObject({ running: true, healthy: false });
    expect(byName['capa-manager']!.unhealthyReason).toMatch(/status 500: \[-\]webhook failed/);
    expect(byName['capi-manager']).toMatchObject({ running: true, healthy: true });
    expect(byName['capi-manager']!.unhealthyReason).toBeUndefined();
    expect(byName['capv-manager']).toMatchObject({ running: true, healthy: false });
    expect(byName['capv-manager']!.unhealthyReason).toMatch(/ECONNREFUSED/);
    expect(byName['agent-manager']).toMatchObject({ running: true, healthy: false, unhealthyReason: 'its health endpoint did not answer within 3 s' });
    expect(usable).toBe(false);
  });
});

import { createServer } from 'node:net';
import { describe, expect, it } from 'vitest';
import { ProcessError } from './errors.js';
import { allocatePort, allocatePorts, isAddressInUse } from './ports.js';

describe('ports', () => {
  it('allocates distinct free loopback ports that can then be bound', async () => {
    const ports = await allocatePorts(5);
    expect(new Set(ports).size).toBe(5);
    const port = await allocatePort();
    const server = createServer();
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, '127.0.0.1', () => resolve());
    });
    server.close();
    expect(port).toBeGreaterThan(0);
  });

  it('recognises "address already in use" in a failed start', () => {
    const failure = (logTail: string[]) =>
      new ProcessError('x', { processName: 'etcd', reason: 'exited', exitStatus: 1, exitSignal: null, logTail, logFile: '/tmp/etcd.log' });
    expect(isAddressInUse(failure(['{"level":"fatal","msg":"listen tcp 127.0.0.1:2379: bind: address already in use"}']))).toBe(true);
    expect(isAddressInUse(failure(['Error: failed to create listener: listen tcp 127.0.0.1:6443: bind: Address already in use']))).toBe(true);
    expect(isAddressInUse(failure(['panic: something else']))).toBe(false);
    expect(isAddressInUse(['EADDRINUSE'])).toBe(true);
    expect(isAddressInUse(new Error('address already in use'))).toBe(false);
  });
});

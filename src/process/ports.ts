/**
 * Loopback ports. `allocatePort` asks the kernel for a free port by binding 127.0.0.1:0 and
 * releasing it; another program can take it before our child binds it, so a child that fails
 * with "address already in use" (see `isAddressInUse`) should be retried on new ports.
 */
import { createServer, type AddressInfo, type Server } from 'node:net';
import { ProcessError } from './errors.js';

/** The only host the control plane binds. */
const loopbackHost = '127.0.0.1';

/** One free port on 127.0.0.1. */
export async function allocatePort(): Promise<number> {
  const [port] = await allocatePorts(1);
  if (port === undefined) throw new Error('no port allocated');
  return port;
}

/** `count` distinct free ports on 127.0.0.1 (all held until every one is allocated, so none repeats). */
export async function allocatePorts(count: number): Promise<number[]> {
  const results = await Promise.allSettled(
    Array.from({ length: count }, () =>
      new Promise<Server>((resolve, reject) => {
        const server = createServer();
        server.once('error', reject);
        server.listen({ host: loopbackHost, port: 0, exclusive: true }, () => resolve(server));
      }),
    ),
  );
  const servers = results.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
  const ports = servers.map((s) => (s.address() as AddressInfo).port);
  await Promise.all(servers.map((s) => new Promise<void>((resolve) => s.close(() => resolve()))));
  const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed) throw failed.reason;
  return ports;
}

/** What Go servers (etcd, kube-apiserver, controller-runtime) print when a port is taken. */
const addressInUsePattern = /address already in use|EADDRINUSE/i;

/**
 * True when a failed start was a port clash: the error is a ProcessError whose log tail (or
 * the given lines) says "address already in use".
 */
export function isAddressInUse(failure: unknown): boolean {
  const lines: readonly string[] = failure instanceof ProcessError ? failure.logTail : Array.isArray(failure) ? (failure as string[]) : [];
  return lines.some((line) => addressInUsePattern.test(line));
}

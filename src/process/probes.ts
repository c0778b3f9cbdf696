/**
 * Readiness probes. A probe is an async function: it resolves `true` when the process is
 * ready; `false` or a throw means "not yet" (the thrown message is kept and shown if start
 * times out). Each attempt gets an AbortSignal that fires when the attempt must give up.
 */
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { connect as tlsConnect } from 'node:tls';

export type ReadinessProbe = (signal: AbortSignal) => Promise<boolean>;

export interface HttpProbeOptions {
  /** PEM CA bundle the server's cert must chain to (https). Default: the system roots. */
  ca?: string;
  /** PEM client certificate and key, for endpoints that require client auth. Default none. */
  cert?: string;
  key?: string;
  /** Status that means ready. Default 200. */
  expectStatus?: number;
}

/** Characters of a response body kept in the "not ready" message. */
const bodyExcerptChars = 200;

/**
 * GETs `url` (http or https); ready when the status is `expectStatus`. The server cert is
 * verified against `ca` (never skipped); a wrong status throws with the body's first 200
 * characters (e.g. kube-apiserver's `/readyz` lists the failing checks).
 */
export function httpProbe(url: string, options: HttpProbeOptions = {}): ReadinessProbe {
  const target = new URL(url);
  const expectStatus = options.expectStatus ?? 200;
  const request = target.protocol === 'https:' ? httpsRequest : httpRequest;
  return (signal) =>
    new Promise<boolean>((resolve, reject) => {
      const req = request(
        target,
        {
          method: 'GET',
          signal,
          ca: options.ca,
          cert: options.cert,
          key: options.key,
          // Loopback only: never send probes through a proxy agent; one connection per attempt.
          agent: false,
        },
        (res) => {
          let body = '';
          res.setEncoding('utf8');
          res.on('data', (chunk: string) => {
            if (body.length < bodyExcerptChars) body += chunk;
          });
          res.on('end', () => {
            if (res.statusCode === expectStatus) resolve(true);
            else reject(new Error(`GET ${url}: status ${res.statusCode}${body ? `: ${body.slice(0, bodyExcerptChars).trim()}` : ''}`));
          });
          res.on('error', reject);
        },
      );
      req.on('error', reject);
      req.end();
    });
}

export interface TcpTlsProbeOptions {
  /** PEM CA to verify the server cert against; when absent the cert is not verified (only the handshake counts). */
  ca?: string;
  /** SNI / name to verify. Default `localhost`. */
  servername?: string;
}

/** Ready when a TLS handshake with `host:port` completes (e.g. etcd before its health endpoint is usable). */
export function tcpTlsProbe(host: string, port: number, options: TcpTlsProbeOptions = {}): ReadinessProbe {
  return (signal) =>
    new Promise<boolean>((resolve, reject) => {
      const socket = tlsConnect({
        host,
        port,
        servername: options.servername ?? 'localhost',
        ca: options.ca,
        rejectUnauthorized: options.ca !== undefined,
      });
      const onAbort = () => socket.destroy(new Error(`TLS probe of ${host}:${port} aborted`));
      signal.addEventListener('abort', onAbort, { once: true });
      const finish = (error?: Error) => {
        signal.removeEventListener('abort', onAbort);
        socket.destroy();
        if (error) reject(error);
        else resolve(true);
      };
      socket.once('secureConnect', () => finish());
      socket.once('error', finish);
    });
}

/**
 * For unit tests: a local https server that stands in for an API server (loopback, TLS with
 * a client certificate, as a real one), a KubeClient of it from a 0600 kubeconfig, and a
 * log of the requests it saw. Each test sets `handler` to answer as the server should.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import type { IncomingMessage, ServerResponse } from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createCertificateAuthority, issueCertificate } from '../../src/pki/certificates.js';
import { writeKubeconfig } from '../../src/pki/kubeconfig.js';
import { KubeClient } from '../../src/kube/client.js';

export type TestServerHandler = (request: IncomingMessage, response: ServerResponse) => void;

/** Answers discovery of `example.com/v1` (kind Thing, namespaced), so typed calls on Things resolve their paths. */
export function servesThings(request: IncomingMessage, response: ServerResponse): boolean {
  if (request.method !== 'GET' || request.url !== '/apis/example.com/v1') return false;
  const resources = [
    { name: 'things', kind: 'Thing', namespaced: true },
    { name: 'things/status', kind: 'Thing', namespaced: true },
  ];
  response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ resources }));
  return true;
}

/** Answers with `status` (a `Status` body) under its own code. */
export function answerStatus(response: ServerResponse, status: { code: number; [field: string]: unknown }): void {
  response.writeHead(status.code, { 'content-type': 'application/json' }).end(JSON.stringify(status));
}

const notFound: TestServerHandler = (_request, response) => void response.writeHead(404).end();

export class TestApiServer {
  /** Requests seen, as `METHOD pathname`. */
  readonly seen: string[] = [];
  /** Answers every request; the default answers 404. */
  handler: TestServerHandler = notFound;

  private constructor(
    readonly client: KubeClient,
    /** The client's kubeconfig file (0600). */
    readonly kubeconfig: string,
    private readonly server: https.Server,
    private readonly dir: string,
  ) {}

  static async start(): Promise<TestApiServer> {
    const dir = await mkdtemp(path.join(tmpdir(), 'kube-test-server-'));
    const ca = await createCertificateAuthority({ commonName: 'test-ca' });
    const serving = await issueCertificate(ca, { commonName: 'apiserver', ipAddresses: ['127.0.0.1'], usages: 'server' });
    const admin = await issueCertificate(ca, { commonName: 'admin', organizations: ['system:masters'], usages: 'client' });
    // The server exists before the instance that answers for it (it needs the server's port).
    const answering: { by?: TestApiServer } = {};
    const server = https.createServer({ key: serving.keyPem, cert: serving.certPem, ca: ca.certPem, requestCert: true, rejectUnauthorized: true }, (request, response) => {
      const instance = answering.by;
      if (instance === undefined) return void response.writeHead(503).end();
      instance.seen.push(`${request.method} ${new URL(request.url ?? '/', 'https://x').pathname}`);
      instance.handler(request, response);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    const kubeconfig = path.join(dir, 'admin.kubeconfig');
    await writeKubeconfig(kubeconfig, { server: `https://127.0.0.1:${port}`, caCertPem: ca.certPem, clientCertPem: admin.certPem, clientKeyPem: admin.keyPem });
    answering.by = new TestApiServer(KubeClient.fromFile(kubeconfig), kubeconfig, server, dir);
    return answering.by;
  }

  /** Before each test: nothing seen, every path 404, and a client that has discovered nothing yet (so no test rides on another's discovery). */
  reset(): void {
    this.seen.length = 0;
    this.handler = notFound;
    this.client.resetDiscovery();
  }

  async close(): Promise<void> {
    this.client.close();
    this.server.closeAllConnections();
    await new Promise((resolve) => this.server.close(resolve));
    await rm(this.dir, { recursive: true, force: true });
  }
}

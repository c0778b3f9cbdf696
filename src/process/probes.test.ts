import { createServer as createHttpsServer, type Server } from 'node:https';
import { createServer as createNetServer } from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCertificateAuthority, issueCertificate, type CertificateAndKey } from '../pki/certificates.js';
import { allocatePort } from './ports.js';
import { httpProbe, tcpTlsProbe } from './probes.js';

let ca: CertificateAndKey;
let otherCa: CertificateAndKey;
let client: CertificateAndKey;
let server: Server;
let port: number;

beforeAll(async () => {
  [ca, otherCa] = await Promise.all([createCertificateAuthority({ commonName: 'probe-ca' }), createCertificateAuthority({ commonName: 'other' })]);
  const [serving, clientPair] = await Promise.all([
    issueCertificate(ca, { commonName: 'server', dnsNames: ['localhost'], ipAddresses: ['127.0.0.1'], usages: 'server' }),
    issueCertificate(ca, { commonName: 'client', usages: 'client' }),
  ]);
  client = clientPair;
  server = createHttpsServer({ cert: serving.certPem, key: serving.keyPem, ca: ca.certPem, requestCert: true, rejectUnauthorized: false }, (req, res) => {
    const authorized = (req.socket as import('node:tls').TLSSocket).authorized;
    if (req.url === '/readyz') {
      res.writeHead(authorized ? 200 : 401).end(authorized ? 'ok' : 'Unauthorized');
    } else {
      res.writeHead(500).end('[-]etcd failed: reason withheld\nreadyz check failed');
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  port = (server.address() as AddressInfo).port;
}, 60_000);

afterAll(() => {
  server?.close();
});

const attempt = () => AbortSignal.timeout(2_000);

describe('httpProbe', () => {
  it('passes on the expected status with the CA and a client cert', async () => {
    const probe = httpProbe(`https://127.0.0.1:${port}/readyz`, { ca: ca.certPem, cert: client.certPem, key: client.keyPem });
    expect(await probe(attempt())).toBe(true);
  });

  it('fails with the status and body excerpt otherwise', async () => {
    await expect(httpProbe(`https://127.0.0.1:${port}/readyz`, { ca: ca.certPem })(attempt())).rejects.toThrow(/status 401: Unauthorized/);
    await expect(httpProbe(`https://127.0.0.1:${port}/livez`, { ca: ca.certPem })(attempt())).rejects.toThrow(/status 500: \[-\]etcd failed/);
    expect(await httpProbe(`https://127.0.0.1:${port}/livez`, { ca: ca.certPem, expectStatus: 500 })(attempt())).toBe(true);
  });

  it('never skips server verification', async () => {
    await expect(httpProbe(`https://127.0.0.1:${port}/readyz`, { ca: otherCa.certPem })(attempt())).rejects.toThrow(/certificate/i);
  });

  it('fails when nothing listens', async () => {
    const free = await allocatePort();
    await expect(httpProbe(`http://127.0.0.1:${free}/`)(attempt())).rejects.toThrow(/ECONNREFUSED/);
  });
});

describe('tcpTlsProbe', () => {
  it('passes once a TLS handshake completes, verified when a CA is given', async () => {
    expect(await tcpTlsProbe('127.0.0.1', port)(attempt())).toBe(true);
    expect(await tcpTlsProbe('127.0.0.1', port, { ca: ca.certPem })(attempt())).toBe(true);
    await expect(tcpTlsProbe('127.0.0.1', port, { ca: otherCa.certPem })(attempt())).rejects.toThrow();
  });

  it('fails on a closed port and on a plain TCP server that hangs, when aborted', async () => {
    const free = await allocatePort();
    await expect(tcpTlsProbe('127.0.0.1', free)(attempt())).rejects.toThrow(/ECONNREFUSED/);
    const silent = createNetServer(() => {});
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', () => resolve()));
    try {
      const silentPort = (silent.address() as AddressInfo).port;
      await expect(tcpTlsProbe('127.0.0.1', silentPort)(AbortSignal.timeout(200))).rejects.toThrow(/aborted/);
    } finally {
      silent.close();
    }
  });
});

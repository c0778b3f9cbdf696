/**
 * releaseClusterAddresses against a stand-in API server: it waits on the one wait primitive
 * (progress/until.ts) for the cluster's IPAddressClaims to go, each claim that goes moving
 * its deadline, and reports what was released and what is still held; an interrupt ends it.
 */
import type { ServerResponse } from 'node:http';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { TestApiServer } from '../../../test/support/test-api-server.js';
import { InterruptedError } from '../../errors.js';
import { nullSink } from '../../events.js';
import type { InstallConfig } from '../../config/index.js';
import { releaseClusterAddresses } from './address-pool.js';

const ipam = '/apis/ipam.cluster.x-k8s.io/v1beta2';
const claim = (name: string, cluster = 'vs') => ({ apiVersion: 'ipam.cluster.x-k8s.io/v1beta2', kind: 'IPAddressClaim', metadata: { name, namespace: 'vs' }, spec: { clusterName: cluster }, status: { addressRef: { name } } });
const address = (name: string, ip: string) => ({ apiVersion: 'ipam.cluster.x-k8s.io/v1beta2', kind: 'IPAddress', metadata: { name, namespace: 'vs' }, spec: { address: ip } });

describe('releaseClusterAddresses', () => {
  let server: TestApiServer;
  /** The claims the server lists now (another cluster's claim among them). */
  let claims: ReturnType<typeof claim>[];
  let lists = 0;
  beforeEach(async () => {
    server = await TestApiServer.start();
    claims = [claim('vs-a'), claim('vs-b'), claim('other-a', 'other')];
    lists = 0;
    server.handler = (request, response: ServerResponse) => {
      const json = (body: unknown) => response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(body));
      const url = new URL(request.url ?? '/', 'https://x').pathname;
      if (url === ipam) return json({ resources: [{ name: 'ipaddressclaims', kind: 'IPAddressClaim', namespaced: true }, { name: 'ipaddresses', kind: 'IPAddress', namespaced: true }] });
      if (url === `${ipam}/namespaces/vs/ipaddressclaims`) return void ((lists += 1), json({ kind: 'IPAddressClaimList', metadata: {}, items: claims }));
      if (url === `${ipam}/namespaces/vs/ipaddresses`) return json({ kind: 'IPAddressList', metadata: {}, items: [address('vs-a', '198.19.250.10'), address('vs-b', '198.19.250.11')] });
      response.writeHead(404).end();
    };
  });
  afterEach(async () => {
    await server.close();
  });

  function context(logs: string[], signal = new AbortController().signal, noProgressTimeoutMs = 1_500) {
    return { config: {} as InstallConfig, dir: '/nonexistent', kubeconfig: server.kubeconfig, signal, log: (m: string) => void logs.push(m), events: nullSink, noProgressTimeoutMs, clusterName: 'vs', namespace: 'vs' };
  }

  it('reports every address released once the claims are gone', async () => {
    const logs: string[] = [];
    const release = await releaseClusterAddresses(context(logs));
    setTimeout(() => (claims = claims.filter((c) => c.metadata.name !== 'vs-a')), 300);
    setTimeout(() => (claims = claims.filter((c) => c.metadata.name !== 'vs-b')), 900);
    await release();
    expect(logs).toEqual(['Addresses of vs/vs released to their pool: vs-a (198.19.250.10), vs-b (198.19.250.11)']);
  });

  it('a claim that goes moves the deadline; one held past the no-progress timeout is reported, not thrown', async () => {
    const logs: string[] = [];
    const release = await releaseClusterAddresses(context(logs));
    const started = Date.now();
    // vs-a goes after 0.7 s (seen by the look at about 1 s), within the 1.5 s timeout; vs-b never does: the wait ends 1.5 s after vs-a was seen to go, not 1.5 s after it started.
    setTimeout(() => (claims = claims.filter((c) => c.metadata.name !== 'vs-a')), 700);
    await release();
    expect(Date.now() - started).toBeGreaterThanOrEqual(2_200);
    expect(logs).toEqual([
      'Addresses of vs/vs released to their pool: vs-a (198.19.250.10)',
      'IPAddressClaims of vs/vs still held, none released for 2 s: vs-b (198.19.250.11) (is capi-manager, which serves the address pools, running? its log says why)',
    ]);
  });

  it('an interrupt ends the wait with an InterruptedError and no more looks', async () => {
    const abort = new AbortController();
    const release = await releaseClusterAddresses(context([], abort.signal, 60_000));
    setTimeout(() => abort.abort(), 700);
    await expect(release()).rejects.toBeInstanceOf(InterruptedError);
    const looked = lists;
    await new Promise((resolve) => setTimeout(resolve, 1_200));
    expect(lists).toBe(looked);
  });

  it('nothing to wait for when the cluster held no claims', async () => {
    claims = [claim('other-a', 'other')];
    const logs: string[] = [];
    await (await releaseClusterAddresses(context(logs)))();
    expect([logs, lists]).toEqual([[], 1]);
  });
});

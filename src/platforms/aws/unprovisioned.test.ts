import { describe, expect, it } from 'vitest';
import type { PlatformDestroyContext, ProviderObject } from '../platform.js';
import { releaseUnprovisionedAws, unprovisionedVerdict } from './unprovisioned.js';

const apiVersion = 'infrastructure.cluster.x-k8s.io/v1beta2';
/** A condition as CAPA sets it when EC2 cannot be reached: the SDK's error for a call that got no HTTP answer (StatusCode: 0), with the network error under it. */
const unreachableMessage =
  'failed to describe VPC resources by name: operation error EC2: DescribeVpcs, exceeded maximum number of attempts, 3, https response error StatusCode: 0, RequestID: , ' +
  'request send failed, Post "https://ec2.eu-west-1.amazonaws.com/": dial tcp: lookup ec2.eu-west-1.amazonaws.com: no such host';

function awsCluster(overrides: { spec?: Record<string, unknown>; status?: Record<string, unknown>; deleting?: boolean } = {}): ProviderObject {
  return {
    apiVersion,
    kind: 'AWSCluster',
    metadata: {
      name: 'stall',
      namespace: 'stall',
      labels: { 'cluster.x-k8s.io/cluster-name': 'stall' },
      finalizers: ['awscluster.infrastructure.cluster.x-k8s.io'],
      ...(overrides.deleting === false ? {} : { deletionTimestamp: '2026-11-23T16:00:00Z' }),
    },
    spec: { region: 'eu-west-1', network: { vpc: { cidrBlock: '10.0.0.0/16' } }, controlPlaneEndpoint: { host: '', port: 0 }, ...overrides.spec },
    status: { conditions: [{ type: 'VpcReady', status: 'False', reason: 'VpcReconciliationFailed', message: unreachableMessage }], ...overrides.status },
  };
}

function awsMachine(spec: Record<string, unknown> = {}): ProviderObject {
  return {
    apiVersion,
    kind: 'AWSMachine',
    metadata: { name: 'stall-cp-abcde', namespace: 'stall', labels: { 'cluster.x-k8s.io/cluster-name': 'stall' }, finalizers: ['awsmachine.infrastructure.cluster.x-k8s.io'], deletionTimestamp: '2026-11-23T16:00:00Z' },
    spec: { instanceType: 't3.large', ...spec },
  };
}

describe('AWS: releasing what CAPA never created', () => {
  it('releases when nothing is recorded in AWS and the condition shows AWS was never reached, saying why', () => {
    const verdict = unprovisionedVerdict(awsCluster(), [awsMachine()]);
    expect(verdict.release).toBe(true);
    if (verdict.release) {
      expect(verdict.reason).toMatch(/no VPC, subnet, security group, load balancer or instance/);
      expect(verdict.reason).toMatch(/VpcReady condition shows AWS was never reached/);
      expect(verdict.reason).toContain('no such host');
    }
  });

  it.each([
    ['a VPC', { spec: { network: { vpc: { id: 'vpc-0123456789abcdef0' } } } }, /VPC vpc-0123456789abcdef0/],
    ['a subnet', { spec: { network: { vpc: {}, subnets: [{ id: 'stall-subnet-private-eu-west-1a', resourceID: 'subnet-0123456789abcdef0' }] } } }, /subnet subnet-0123456789abcdef0/],
    ['an internet gateway', { spec: { network: { vpc: { internetGatewayId: 'igw-1' } } } }, /internet gateway/],
    ['a security group', { status: { network: { securityGroups: { node: { id: 'sg-1', name: 'stall-node' } } } } }, /security groups/],
    ['a load balancer', { status: { network: { apiServerElb: { arn: 'arn:aws:elasticloadbalancing:…', dnsName: 'x.elb.amazonaws.com' } } } }, /load balancer/],
    ['the API endpoint', { spec: { controlPlaneEndpoint: { host: 'x.elb.amazonaws.com', port: 6443 } } }, /API endpoint/],
    ['a bastion', { status: { bastion: { instanceID: 'i-1' } } }, /bastion/],
  ])('keeps waiting when the AWSCluster records %s', (_what, overrides, recorded) => {
    const cluster = awsCluster(overrides);
    // What the status override replaced: the unreachable condition stays.
    cluster.status = { conditions: awsCluster().status!['conditions'], ...cluster.status };
    const verdict = unprovisionedVerdict(cluster, []);
    expect(verdict).toMatchObject({ release: false });
    if (!verdict.release) expect(verdict.why).toMatch(recorded);
  });

  it('keeps waiting when an AWSMachine records an instance', () => {
    expect(unprovisionedVerdict(awsCluster(), [awsMachine({ instanceID: 'i-0123456789abcdef0' })])).toMatchObject({ release: false, why: expect.stringMatching(/instance i-0123456789abcdef0/) });
    expect(unprovisionedVerdict(awsCluster(), [awsMachine({ providerID: 'aws:///eu-west-1a/i-1' })])).toMatchObject({ release: false });
  });

  it('keeps waiting when AWS answered (an HTTP status), or when no condition shows it unreachable', () => {
    const answered = awsCluster({ status: { conditions: [{ type: 'VpcReady', status: 'False', message: 'operation error EC2: DescribeVpcs, https response error StatusCode: 401, RequestID: 1, api error AuthFailure' }] } });
    expect(unprovisionedVerdict(answered, [])).toMatchObject({ release: false });
    const mixed = awsCluster({ status: { conditions: [...(awsCluster().status!['conditions'] as unknown[]), { type: 'LoadBalancerReady', status: 'False', message: 'StatusCode: 400, RequestID: 2, ValidationError' }] } });
    expect(unprovisionedVerdict(mixed, [])).toMatchObject({ release: false });
    expect(unprovisionedVerdict(awsCluster({ status: { conditions: [{ type: 'Ready', status: 'False', reason: 'Deleting', message: 'waiting' }] } }), [])).toMatchObject({ release: false });
    expect(unprovisionedVerdict(awsCluster({ status: { conditions: [] } }), [])).toMatchObject({ release: false });
  });

  it('reads the v1beta2 conditions too', () => {
    const cluster = awsCluster({ status: { conditions: [], v1beta2: { conditions: [{ type: 'VpcReady', status: 'False', reason: 'VpcReconciliationFailed', message: unreachableMessage }] } } });
    expect(unprovisionedVerdict(cluster, []).release).toBe(true);
  });

  function context(objects: ProviderObject[]): PlatformDestroyContext & { released: string[]; logged: string[] } {
    const released: string[] = [];
    const logged: string[] = [];
    return {
      config: {} as PlatformDestroyContext['config'],
      clusterName: 'stall',
      namespace: 'stall',
      list: async (_apiVersion, kind) => objects.filter((o) => o.kind === kind),
      releaseFinalizers: async (object) => void released.push(`${object.kind}/${object.metadata.name}`),
      log: (message) => void logged.push(message),
      released,
      logged,
    };
  }
  const kinds = { apiVersion, cluster: 'AWSCluster', machine: 'AWSMachine' };

  it('releases the machines, then the AWSCluster, only those being deleted', async () => {
    const ctx = context([awsCluster(), awsMachine(), { ...awsMachine(), metadata: { ...awsMachine().metadata, name: 'not-deleted', deletionTimestamp: undefined } }]);
    const released = await releaseUnprovisionedAws(ctx, kinds);
    expect(ctx.released).toEqual(['AWSMachine/stall-cp-abcde', 'AWSCluster/stall']);
    expect(released.map((r) => r.reason)).toEqual([expect.stringMatching(/never reached/), expect.stringMatching(/never reached/)]);
  });

  it('releases nothing when anything is recorded, and says why', async () => {
    const ctx = context([awsCluster({ spec: { network: { vpc: { id: 'vpc-0123456789abcdef0' } } } })]);
    expect(await releaseUnprovisionedAws(ctx, kinds)).toEqual([]);
    expect(ctx.released).toEqual([]);
    expect(ctx.logged.join('\n')).toMatch(/keeps its finalizer: AWSCluster stall records VPC vpc-0123456789abcdef0/);
  });

  it('releases nothing of an AWSCluster not being deleted', async () => {
    const ctx = context([awsCluster({ deleting: false })]);
    expect(await releaseUnprovisionedAws(ctx, kinds)).toEqual([]);
  });
});

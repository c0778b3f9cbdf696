import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ConfigError, ExitCode, exitCodeOf } from '../errors.js';
import { installConfigSchema } from '../platforms/index.js';
import type { AwsMachine, AwsPlatform } from '../platforms/aws/config.js';
import { awsPlatform } from '../platforms/aws/index.js';
import { loadInstallConfigText, validateInstallConfigText } from './load.js';

const base = `apiVersion: provisioner.dev/v1alpha1
kind: InstallConfig
metadata:
  name: demo
machinePools:
  - name: control-plane
    quantity: 3
    roles: [etcd, controlPlane]
  - name: worker
    quantity: 2
    roles: [worker]
`;

const awsBase = `${base}platform:
  aws:
    region: us-east-1
`;

function problemsOf(text: string): ConfigError {
  try {
    validateInstallConfigText(text, { schema: installConfigSchema });
  } catch (error) {
    if (error instanceof ConfigError) return error;
    throw error;
  }
  throw new Error('expected the install config to be rejected');
}

interface Case {
  name: string;
  text: string;
  /** Every problem's path, exactly. */
  paths: string[];
  /** A fragment the first problem's message or hint must contain. */
  says?: string;
}

const cases: Case[] = [
  { name: 'apiVersion missing', text: base.replace('apiVersion: provisioner.dev/v1alpha1\n', ''), paths: ['apiVersion'] },
  { name: 'apiVersion wrong', text: base.replace('v1alpha1', 'v1'), paths: ['apiVersion'], says: 'provisioner.dev/v1alpha1' },
  { name: 'kind wrong', text: base.replace('kind: InstallConfig', 'kind: Cluster'), paths: ['kind'] },
  { name: 'name missing', text: base.replace('  name: demo\n', '  labels: {}\n'), paths: ['metadata.labels', 'metadata.name'] },
  { name: 'name with capitals', text: base.replace('name: demo', 'name: Demo'), paths: ['metadata.name'], says: 'lowercase' },
  { name: 'name starting with a digit', text: base.replace('name: demo', 'name: 1demo'), paths: ['metadata.name'] },
  { name: 'name too long', text: base.replace('name: demo', `name: ${'a'.repeat(41)}`), paths: ['metadata.name'], says: 'at most 40' },
  { name: 'namespace owned by Kubernetes', text: base.replace('  name: demo\n', '  name: demo\n  namespace: kube-system\n'), paths: ['metadata.namespace'] },
  { name: 'unknown top-level field', text: `${base}workers: 3\n`, paths: ['workers'] },
  { name: 'misspelled machinePools', text: base.replace('machinePools:', 'machinepools:'), paths: ['machinePools', 'machinepools'], says: 'is required' },
  { name: 'no machine pools', text: base.slice(0, base.indexOf('machinePools:')) + 'machinePools: []\n', paths: ['machinePools'], says: 'at least one' },
  { name: 'no control-plane pool', text: base.replace('roles: [etcd, controlPlane]', 'roles: [worker]'), paths: ['machinePools'], says: 'controlPlane' },
  { name: 'two control-plane pools', text: base.replace('roles: [worker]', 'roles: [etcd, controlPlane]').replace('quantity: 2', 'quantity: 1'), paths: ['machinePools[1].roles'], says: 'only one pool' },
  { name: 'control plane without etcd', text: base.replace('roles: [etcd, controlPlane]', 'roles: [controlPlane]'), paths: ['machinePools[0].roles'], says: 'etcd' },
  { name: 'etcd-only pool', text: base.replace('roles: [worker]', 'roles: [etcd]'), paths: ['machinePools[1].roles'], says: 'not supported' },
  { name: 'even control-plane count', text: base.replace('quantity: 3', 'quantity: 4'), paths: ['machinePools[0].quantity'], says: 'even' },
  { name: 'empty control plane', text: base.replace('quantity: 3', 'quantity: 0'), paths: ['machinePools[0].quantity'], says: 'at least one machine' },
  { name: 'negative quantity', text: base.replace('quantity: 2', 'quantity: -1'), paths: ['machinePools[1].quantity'], says: 'at least 0' },
  { name: 'quantity as a string', text: base.replace('quantity: 3', 'quantity: "3"'), paths: ['machinePools[0].quantity'], says: 'integer' },
  { name: 'fractional quantity', text: base.replace('quantity: 2', 'quantity: 2.5'), paths: ['machinePools[1].quantity'], says: 'whole number' },
  { name: 'unknown role', text: base.replace('roles: [etcd, controlPlane]', 'roles: [etcd, controlplane]'), paths: ['machinePools[0].roles[1]'], says: 'did you mean "controlPlane"' },
  { name: 'repeated role', text: base.replace('roles: [worker]', 'roles: [worker, worker]'), paths: ['machinePools[1].roles[1]'], says: 'duplicates' },
  { name: 'duplicate pool names', text: base.replace('name: worker', 'name: control-plane'), paths: ['machinePools[1].name'], says: 'duplicates' },
  { name: 'pool name not a DNS label', text: base.replace('name: worker', 'name: Worker_1'), paths: ['machinePools[1].name'] },
  { name: 'generated names too long', text: base.replace('name: demo', `name: ${'c'.repeat(40)}`).replace('name: worker', `name: ${'w'.repeat(30)}`), paths: ['machinePools[1].name'], says: '63' },
  { name: 'reserved label domain', text: base.replace('roles: [worker]', 'roles: [worker]\n    labels: {kubernetes.io/hostname: x}'), paths: ['machinePools[1].labels["kubernetes.io/hostname"]'], says: 'reserved' },
  { name: 'invalid label value', text: base.replace('roles: [worker]', 'roles: [worker]\n    labels: {example.com/team: "a b"}'), paths: ['machinePools[1].labels["example.com/team"]'] },
  { name: 'invalid taint effect', text: base.replace('roles: [worker]', 'roles: [worker]\n    taints: [{key: example.com/x, effect: NoScheduleX}]'), paths: ['machinePools[1].taints[0].effect'], says: 'did you mean "NoSchedule"' },
  { name: 'repeated taint', text: base.replace('roles: [worker]', 'roles: [worker]\n    taints: [{key: a, effect: NoSchedule}, {key: a, value: b, effect: NoSchedule}]'), paths: ['machinePools[1].taints[1]'] },
  { name: 'overlapping pod and service networks', text: `${base}networking:\n  podCIDRs: [10.0.0.0/8]\n  serviceCIDRs: [10.96.0.0/12]\n`, paths: ['networking.serviceCIDRs[0]'], says: 'overlaps networking.podCIDRs[0]' },
  { name: 'CIDR with host bits', text: `${base}networking:\n  podCIDRs: [192.168.1.0/16]\n`, paths: ['networking.podCIDRs[0]'], says: '192.168.0.0/16' },
  { name: 'not a CIDR', text: `${base}networking:\n  serviceCIDRs: [10.96.0.0]\n`, paths: ['networking.serviceCIDRs[0]'] },
  { name: 'two IPv4 pod networks', text: `${base}networking:\n  podCIDRs: [192.168.0.0/16, 172.16.0.0/16]\n`, paths: ['networking.podCIDRs[1]'], says: 'IPv4' },
  { name: 'pods dual-stack, services not', text: `${base}networking:\n  podCIDRs: [192.168.0.0/16, fd00::/56]\n`, paths: ['networking.serviceCIDRs'], says: 'same IP families' },
  { name: 'service domain not a domain', text: `${base}networking:\n  serviceDomain: Cluster_Local\n`, paths: ['networking.serviceDomain'] },
  { name: 'Kubernetes version too old', text: `${base}kubernetesVersion: v1.29.0\n`, paths: ['kubernetesVersion'], says: 'supported range' },
  { name: 'Kubernetes version malformed', text: `${base}kubernetesVersion: "1.36"\n`, paths: ['kubernetesVersion'] },
  { name: 'no platform key', text: `${base}platform: {}\n`, paths: ['platform'], says: 'exactly one' },
  { name: 'two platforms', text: `${base}platform: {inmemory: {}, aws: {region: us-east-1}}\n`, paths: ['platform'], says: 'exactly one' },
  { name: 'unknown platform', text: `${base}platform: {gcp: {}}\n`, paths: ['platform', 'platform.gcp'] },
  { name: 'aws without region', text: `${base}platform:\n  aws: {sshKeyName: k}\n`, paths: ['platform.aws.region'] },
  { name: 'aws subnets without a VPC', text: `${awsBase}    subnets: [subnet-0123456789abcdef0]\n`, paths: ['platform.aws.vpcID'], says: 'vpcID' },
  { name: 'aws pool subnet not listed', text: awsBase.replace('roles: [worker]', 'roles: [worker]\n    platform: {aws: {subnet: subnet-0000000000000000f}}') + '    vpcID: vpc-0123456789abcdef0\n    subnets: [subnet-0123456789abcdef0]\n', paths: ['machinePools[1].platform.aws.subnet'] },
  { name: 'aws VPC overlapping services', text: `${awsBase}    vpcCIDR: 10.128.0.0/16\n`, paths: ['platform.aws.vpcCIDR'], says: 'overlaps' },
  { name: 'aws endpoint without a scheme', text: `${awsBase}    endpointURL: aws-proxy.example.com\n`, paths: ['platform.aws.endpointURL'], says: 'http(s) URL' },
  { name: 'aws keys written inline', text: `${awsBase}    credentials:\n      secretAccessKey: abc\n`, paths: ['platform.aws.credentials.secretAccessKey'], says: 'credentials file' },
  { name: 'aws settings on an inmemory cluster', text: base.replace('roles: [worker]', 'roles: [worker]\n    platform: {aws: {instanceType: m5.large}}'), paths: ['machinePools[1].platform.aws'], says: 'inmemory' },
  { name: 'aws root volume too small', text: awsBase.replace('roles: [worker]', 'roles: [worker]\n    platform: {aws: {rootVolumeSize: 4}}'), paths: ['machinePools[1].platform.aws.rootVolumeSize'] },
  { name: 'inmemory jitter above 1', text: base.replace('roles: [worker]', 'roles: [worker]\n    platform: {inmemory: {startupJitter: 2}}'), paths: ['machinePools[1].platform.inmemory.startupJitter'] },
  { name: 'hook without path', text: `${base}hooks:\n  preProvision: [{timeout: 1m}]\n`, paths: ['hooks.preProvision[0].path'] },
  { name: 'hook timeout not a duration', text: `${base}hooks:\n  postProvision: [{path: ./x, timeout: 10 minutes}]\n`, paths: ['hooks.postProvision[0].timeout'], says: '1h30m' },
  { name: 'unknown hook stage', text: `${base}hooks:\n  preInstall: [{path: ./x}]\n`, paths: ['hooks.preInstall'] },
  { name: 'a list instead of a mapping', text: '- a\n- b\n', paths: ['(document)'] },
  { name: 'several problems at once', text: base.replace('name: demo', 'name: Demo').replace('quantity: 3', 'quantity: 2').replace('roles: [worker]', 'roles: [wroker]'), paths: ['machinePools[0].quantity', 'machinePools[1].roles[0]', 'metadata.name'] },
];

describe('malformed and contradictory install configs', () => {
  it('has at least 30 cases', () => {
    expect(cases.length).toBeGreaterThanOrEqual(30);
  });

  for (const c of cases) {
    it(`rejects: ${c.name} -> ${c.paths.join(', ')}`, () => {
      const error = problemsOf(c.text);
      expect(exitCodeOf(error)).toBe(ExitCode.config);
      expect(error.problems.map((p) => p.path).sort()).toEqual([...c.paths].sort());
      expect(error.hint).toMatch(/explain install-config/);
      for (const problem of error.problems) expect(problem.hint, problem.path).toBeTruthy();
      if (c.says) {
        const first = error.problems.find((p) => p.path === c.paths[0]) ?? error.problems[0];
        expect(`${first?.message} ${first?.hint ?? ''}`).toContain(c.says);
      }
    });
  }

  it('reports YAML syntax errors with their line', () => {
    const error = problemsOf(base.replace('roles: [worker]', 'roles: [worker'));
    expect(error.message).toMatch(/not valid YAML/);
    expect(error.problems[0]?.path).toBe('install-config.yaml');
    expect(error.problems[0]?.message).toMatch(/^line \d+, column \d+:/);
  });

  it('rejects duplicate keys', () => {
    const error = problemsOf(base.replace('  name: demo\n', '  name: demo\n  name: other\n'));
    expect(error.problems[0]?.path).toBe('install-config.yaml');
    expect(error.problems[0]?.message).toMatch(/line 5/);
  });

  it('refuses an alias bomb as a config error naming the file and the limit, not a crash', () => {
    // Seven levels of nine aliases: 9^7 strings once expanded, from a few hundred bytes.
    const levels = ['a: &a [x, x, x, x, x, x, x, x, x]', ...'bcdefg'.split('').map((name, i) => `${name}: &${name} [${Array(9).fill(`*${'abcdefg'[i]}`).join(', ')}]`)];
    const error = problemsOf(`${base}bomb:\n${levels.map((l) => `  ${l}`).join('\n')}\n`);
    expect(exitCodeOf(error)).toBe(ExitCode.config);
    expect(error.message).toMatch(/^install-config\.yaml resolves more YAML aliases than the install config limit of 100/);
  });

  it('refuses a file over the install config size limit', () => {
    expect(problemsOf(`${base}# ${'x'.repeat(4 * 1024 * 1024)}\n`).message).toMatch(/over the install config size limit of 4 MiB$/);
  });

  it('rejects an empty file', () => {
    expect(problemsOf('').problems.map((p) => p.path)).toEqual(['(document)']);
  });

  it('gives the line of each problem, and the field to explain when no rule has a better hint', () => {
    const error = problemsOf(base.replace('quantity: 2', 'quantity: -1'));
    expect(error.problems[0]?.message).toMatch(/\(line 10\)$/);
    expect(error.problems[0]?.hint).toBe('see `provisioner explain install-config.machinePools.quantity`');
  });
});

describe('valid install configs', () => {
  it('fills defaults and computed fields', () => {
    const { config } = validateInstallConfigText(base, { schema: installConfigSchema });
    expect(config.metadata.namespace).toBe('demo');
    expect(config.kubernetesVersion).toBe('v1.36.3');
    expect(config.networking).toEqual({ podCIDRs: ['192.168.0.0/16'], serviceCIDRs: ['10.128.0.0/12'], serviceDomain: 'cluster.local' });
    expect(config.platform).toEqual({ inmemory: {} });
    expect(config.machinePools[1]).toMatchObject({ labels: {}, taints: [], platform: { inmemory: { startup: { vm: '10s', node: '2s', apiServer: '2s', etcd: '2s' }, startupJitter: 0.2 } } });
  });

  it('derives aws machine settings from the platform section', () => {
    const { config } = validateInstallConfigText(`${awsBase}    defaultInstanceType: m6i.large\n    ami: ami-0123456789abcdef0\n`, { schema: installConfigSchema });
    expect(config.machinePools[0]?.platform.aws).toEqual({ instanceType: 'm6i.large', rootVolumeSize: 80, ami: 'ami-0123456789abcdef0', iamInstanceProfile: 'control-plane.cluster-api-provider-aws.sigs.k8s.io' });
    expect((config.machinePools[1]?.platform.aws as AwsMachine | undefined)?.iamInstanceProfile).toBe('nodes.cluster-api-provider-aws.sigs.k8s.io');
    expect((config.platform.aws as AwsPlatform | undefined)?.credentials).toEqual({ file: '~/.aws/credentials', profile: 'default' });
  });

  it('gives the provider platform.aws.endpointURL as AWS_ENDPOINT_URL, beside the profile and region, and nothing when unset', () => {
    const withEndpoint = validateInstallConfigText(`${awsBase}    endpointURL: http://127.0.0.1:4566\n`, { schema: installConfigSchema }).config;
    expect(awsPlatform.credentialFiles(withEndpoint, '/install')[0]?.settings).toEqual({ AWS_PROFILE: 'default', AWS_REGION: 'us-east-1', AWS_ENDPOINT_URL: 'http://127.0.0.1:4566' });
    const without = validateInstallConfigText(awsBase, { schema: installConfigSchema }).config;
    expect(awsPlatform.credentialFiles(without, '/install')[0]?.settings).toEqual({ AWS_PROFILE: 'default', AWS_REGION: 'us-east-1' });
  });

  it('warns, without failing, about a control plane without high availability and pools that run nothing', () => {
    const { warnings } = validateInstallConfigText(base.replace('quantity: 3', 'quantity: 1').replace('quantity: 2', 'quantity: 0'), { schema: installConfigSchema });
    expect(warnings.map((w) => w.path).sort()).toEqual(['machinePools', 'machinePools[0].quantity']);
  });
});

describe('files the install config references', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'provisioner-config-'));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('requires hooks to be executable files, relative to the install directory', async () => {
    await writeFile(path.join(dir, 'not-executable.sh'), '#!/bin/sh\n');
    await writeFile(path.join(dir, 'ok.sh'), '#!/bin/sh\n');
    await chmod(path.join(dir, 'ok.sh'), 0o755);
    const text = `${base}hooks:\n  preProvision:\n    - path: ./ok.sh\n    - path: ./missing.sh\n    - path: not-executable.sh\n`;
    const error = await loadInstallConfigText(text, { dir, schema: installConfigSchema }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ConfigError);
    const problems = (error as ConfigError).problems;
    expect(problems.map((p) => p.path)).toEqual(['hooks.preProvision[1].path', 'hooks.preProvision[2].path']);
    expect(problems[0]?.message).toContain('does not exist');
    expect(problems[1]?.hint).toContain('chmod +x');
  });

  it('reports file problems together with field problems', async () => {
    const text = `${base.replace('quantity: 3', 'quantity: 2')}hooks:\n  preProvision:\n    - path: ./missing.sh\n`;
    const error = (await loadInstallConfigText(text, { dir, schema: installConfigSchema }).catch((e: unknown) => e)) as ConfigError;
    expect(error.problems.map((p) => p.path).sort()).toEqual(['hooks.preProvision[0].path', 'machinePools[0].quantity']);
  });

  it('warns when the credentials file is missing or readable by others, never failing manifests for it', async () => {
    const missing = await loadInstallConfigText(`${awsBase}    sshKeyName: k\n    credentials: {file: ./creds}\n`, { dir, schema: installConfigSchema });
    expect(missing.warnings.map((w) => w.path)).toEqual(['platform.aws.credentials.file']);
    await writeFile(path.join(dir, 'creds'), '[default]\n', { mode: 0o644 });
    const open = await loadInstallConfigText(`${awsBase}    sshKeyName: k\n    credentials: {file: ./creds}\n`, { dir, schema: installConfigSchema });
    expect(open.warnings[0]?.hint).toContain('chmod 600');
    await chmod(path.join(dir, 'creds'), 0o600);
    const ok = await loadInstallConfigText(`${awsBase}    sshKeyName: k\n    credentials: {file: ./creds}\n`, { dir, schema: installConfigSchema });
    expect(ok.warnings).toEqual([]);
  });
});

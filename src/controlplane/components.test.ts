import { describe, expect, it } from 'vitest';
import type { ControlPlanePki } from '../pki/index.js';
import type { ArgMap } from '../process/args.js';
import { UsageError } from '../errors.js';
import { apiServerArgs, controllerArgs, controlPlaneGoGcEnv, etcdArgs, forwarderArgs, goRuntimeEnv } from './components.js';

const files = (name: string) => ({ certFile: `/pki/${name}.crt`, keyFile: `/pki/${name}.key` });
// Only the file paths are read by the arg builders; no keys are generated for this test.
const pki: ControlPlanePki = {
  dir: '/pki',
  caCertPem: 'CA',
  ca: files('ca'),
  apiServer: files('apiserver'),
  admin: files('admin'),
  serviceAccount: { privateKeyFile: '/pki/sa.key', publicKeyFile: '/pki/sa.pub' },
  etcdCa: files('etcd/ca'),
  etcdServer: files('etcd/server'),
  apiServerEtcdClient: files('apiserver-etcd-client'),
  webhooks: {},
  generated: [],
};

/** Every value of a flag whose name says it listens, binds or advertises. */
function addressFlags(args: ArgMap): [string, string][] {
  return Object.entries(args)
    .filter(([name]) => /listen|bind|advertise|addr|address|url|servers|issuer/.test(name))
    .map(([name, value]) => [name, String(value)]);
}

function hostsOf(value: string): string[] {
  return value.split(',').flatMap((part) => {
    const withoutName = part.includes('=') ? part.slice(part.indexOf('=') + 1) : part;
    const match = /^(?:[a-z]+:\/\/)?(\[[^\]]+\]|[^:/]+)/.exec(withoutName);
    return match?.[1] ? [match[1]] : [];
  });
}

describe('etcdArgs', () => {
  const args = etcdArgs(pki, '/data/etcd', { client: 2379, peer: 2380, metrics: 2381 });

  it('listens and advertises on 127.0.0.1 only', () => {
    const flags = addressFlags(args);
    expect(flags.map(([name]) => name).sort()).toEqual(
      ['advertise-client-urls', 'initial-advertise-peer-urls', 'listen-client-urls', 'listen-metrics-urls', 'listen-peer-urls'].sort(),
    );
    for (const [, value] of flags) for (const host of hostsOf(value)) expect(host).toBe('127.0.0.1');
    expect(args['listen-client-urls']).toBe('https://127.0.0.1:2379');
    expect(args['initial-cluster']).toBe('provisioner=http://127.0.0.1:2380');
  });

  it('keeps fsync on and requires client certs', () => {
    expect(Object.keys(args).some((k) => k.includes('unsafe-no-fsync'))).toBe(false);
    expect(args['client-cert-auth']).toBe(true);
    expect(args['data-dir']).toBe('/data/etcd');
  });

  it('lets overrides win', () => {
    const overridden = etcdArgs(pki, '/data/etcd', { client: 1, peer: 2, metrics: 3 }, { 'log-level': 'debug', 'quota-backend-bytes': 1024 });
    expect(overridden['log-level']).toBe('debug');
    expect(overridden['quota-backend-bytes']).toBe(1024);
  });
});

describe('apiServerArgs', () => {
  const args = apiServerArgs(pki, 2379, { secure: 6443 });

  it('binds, advertises and reaches etcd on 127.0.0.1 only', () => {
    expect(args['bind-address']).toBe('127.0.0.1');
    expect(args['advertise-address']).toBe('127.0.0.1');
    expect(args['etcd-servers']).toBe('https://127.0.0.1:2379');
    for (const [, value] of addressFlags(args)) for (const host of hostsOf(value)) expect(host).toBe('127.0.0.1');
    expect(args['secure-port']).toBe(6443);
  });

  it('uses the PKI files and RBAC', () => {
    expect(args['client-ca-file']).toBe('/pki/ca.crt');
    expect(args['etcd-certfile']).toBe('/pki/apiserver-etcd-client.crt');
    expect(args['service-account-signing-key-file']).toBe('/pki/sa.key');
    expect(args['authorization-mode']).toBe('RBAC');
    expect(args.profiling).toBe(false);
  });

  it('lets overrides win', () => {
    expect(apiServerArgs(pki, 2379, { secure: 6443 }, { 'authorization-mode': 'Node,RBAC', v: 4 })).toMatchObject({ 'authorization-mode': 'Node,RBAC', v: 4 });
  });

  it('serves only the API groups a management cluster uses, events and leases included', () => {
    const groups = String(args['runtime-config']).split(',');
    expect(groups[0]).toBe('api/all=false');
    for (const group of ['api/v1', 'apiextensions.k8s.io/v1', 'admissionregistration.k8s.io/v1', 'rbac.authorization.k8s.io/v1', 'coordination.k8s.io/v1', 'events.k8s.io/v1', 'authentication.k8s.io/v1', 'authorization.k8s.io/v1']) {
      expect(groups).toContain(`${group}=true`);
    }
    expect(groups.filter((g) => /^(apps|batch|policy|storage\.k8s\.io)\//.test(g))).toEqual([]);
  });

  it('keeps no watch cache for CRDs alone, every other resource keeping its own', () => {
    expect(args['watch-cache-sizes']).toBe('customresourcedefinitions.apiextensions.k8s.io#0');
    expect('watch-cache' in args).toBe(false);
  });

  it('keeps the webhook admission plugins and NamespaceLifecycle on', () => {
    const disabled = String(args['disable-admission-plugins']).split(',');
    expect(disabled).toContain('ResourceQuota');
    for (const kept of ['MutatingAdmissionWebhook', 'ValidatingAdmissionWebhook', 'NamespaceLifecycle']) expect(disabled).not.toContain(kept);
  });
});

describe('controllerArgs', () => {
  it('serves health and diagnostics on 127.0.0.1, without leader election', () => {
    const args = controllerArgs('/kubeconfig', '/certs', { webhook: 9443, health: 9440, diagnostics: 8443 });
    expect(args['health-addr']).toBe('127.0.0.1:9440');
    expect(args['diagnostics-address']).toBe('127.0.0.1:8443');
    expect(args['webhook-port']).toBe(9443);
    expect(args['leader-elect']).toBe(false);
    for (const [, value] of addressFlags(args)) for (const host of hostsOf(value)) expect(host).toBe('127.0.0.1');
    // No gates given: no empty --feature-gates flag.
    expect('feature-gates' in args).toBe(false);
  });

  it('renders feature gates sorted by name', () => {
    const args = controllerArgs('/k', '/c', { webhook: 1, health: 2, diagnostics: 3 }, { MachinePool: true, ClusterTopology: false, KubeadmBootstrapFormatIgnition: true });
    expect(args['feature-gates']).toBe('ClusterTopology=false,KubeadmBootstrapFormatIgnition=true,MachinePool=true');
  });

  it('lets overrides win, including over feature gates', () => {
    const args = controllerArgs('/k', '/c', { webhook: 1, health: 2, diagnostics: 3 }, { A: true }, { 'leader-elect': true, 'feature-gates': 'B=true' });
    expect(args['leader-elect']).toBe(true);
    expect(args['feature-gates']).toBe('B=true');
  });
});

describe('forwarderArgs', () => {
  it('listens on the named address only, health on loopback, the file server on the same address when asked', () => {
    const ports = { listen: 6443, health: 9440, artifacts: 6480 };
    expect(forwarderArgs('198.18.0.1:6443', 7000, ports)).toEqual({ listen: '198.18.0.1:6443', target: '127.0.0.1:7000', 'health-addr': '127.0.0.1:9440' });
    const args = forwarderArgs('198.18.0.1:6443', 7000, ports, { listen: '198.18.0.1:6480', dir: '/d/.provisioner/controlplane/artifacts' });
    expect(args).toMatchObject({ 'artifacts-listen': '198.18.0.1:6480', 'artifacts-dir': '/d/.provisioner/controlplane/artifacts' });
    const hosts = addressFlags(args).flatMap(([, value]) => hostsOf(value));
    expect(new Set(hosts)).toEqual(new Set(['198.18.0.1', '127.0.0.1']));
  });
});

describe('goRuntimeEnv', () => {
  it('gives every child GOGC=25 when the control plane lasts and 100 when it ends with the command, unless PROVISIONER_CONTROL_PLANE_GOGC names another whole percentage', () => {
    expect(goRuntimeEnv('lasting', {})).toEqual({ GOGC: '25' });
    expect(goRuntimeEnv('temporary', {})).toEqual({ GOGC: '100' });
    expect(goRuntimeEnv('lasting', { [controlPlaneGoGcEnv]: '' })).toEqual({ GOGC: '25' });
    expect(goRuntimeEnv('lasting', { [controlPlaneGoGcEnv]: ' 100 ' })).toEqual({ GOGC: '100' });
    expect(goRuntimeEnv('temporary', { [controlPlaneGoGcEnv]: '10' })).toEqual({ GOGC: '10' });
  });

  it('refuses a value that is not a percentage from 10 to 1000, naming the variable and the range', () => {
    for (const value of ['off', '9', '1001', '50%', '-1', '1e2']) {
      let error: unknown;
      try {
        goRuntimeEnv('lasting', { [controlPlaneGoGcEnv]: value });
      } catch (thrown) {
        error = thrown;
      }
      expect(error, value).toBeInstanceOf(UsageError);
      expect((error as UsageError).message).toBe(`PROVISIONER_CONTROL_PLANE_GOGC is ${JSON.stringify(value)}: not a garbage-collection target`);
      expect((error as UsageError).hint).toContain('from 10 to 1000');
    }
  });
});

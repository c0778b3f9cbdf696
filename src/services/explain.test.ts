import { describe, expect, it } from 'vitest';
import { UsageError } from '../errors.js';
import { RecordingSink } from '../../test/support/recording-sink.js';
import { explain } from './explain.js';

const run = (target: string, recursive = false) => explain({ target, recursive, sink: new RecordingSink() });

describe('explain', () => {
  it('documents the whole install config with its top-level fields', () => {
    const text = run('install-config');
    expect(text).toMatch(/^FIELD: {4}install-config <object>/);
    expect(text).toContain('machinePools <[]object> -required-');
    expect(text).toContain('kubernetesVersion <string(version)> (default: "v1.36.3")');
  });

  it('documents a nested field through lists, with its rules and allowed values', () => {
    const text = run('install-config.machinePools.roles');
    expect(text).toContain('FIELD:    install-config.machinePools.roles <[]enum(etcd|controlPlane|worker)> -required-');
    expect(text).toContain('Exactly one pool has the controlPlane role');
    expect(text).toContain('ALLOWED VALUES: etcd, controlPlane, worker');
    expect(run('install-config.machinePools[].roles')).toBe(text);
  });

  it('documents manifests.layout: both layouts, the default, and what topology needs', () => {
    const text = run('install-config.manifests.layout');
    expect(text).toContain('FIELD:    install-config.manifests.layout <enum(classic|topology)> (default: "classic")');
    expect(text).toContain('ClusterClass');
    expect(text).toContain('ALLOWED VALUES: classic, topology');
  });

  it('shows computed defaults and formats', () => {
    expect(run('install-config.metadata.namespace')).toContain('(default: metadata.name)');
    expect(run('install-config.hooks.preProvision.timeout')).toContain('FORMAT: a duration such as 30s, 5m or 1h30m');
  });

  it('documents the vsphere section: vCenter, inventory, endpoint and the credentials file by reference', () => {
    const text = run('install-config.platform.vsphere', true);
    for (const field of ['server <string> -required-', 'thumbprint <string>', 'datacenter', 'datastore', 'network', 'resourcePool', 'folder', 'template', 'controlPlaneEndpoint <object> -required-', 'credentials <object>']) {
      expect(text).toContain(field);
    }
    expect(run('install-config.platform.vsphere.controlPlaneEndpoint.port')).toContain('(default: 6443)');
    expect(run('install-config.machinePools.platform.vsphere.template')).toContain('(default: platform.vsphere.template)');
  });

  it('documents platform.vsphere.network.addressPool: its fields, rules and defaults', () => {
    const text = run('install-config.platform.vsphere.network.addressPool', true);
    for (const part of ['addresses <[]string> -required-', 'prefix <integer> -required-', 'gateway <string(ipv4)> -required-', 'nameservers <[]string(ipv4)> (default: [])', 'Default: unset', 'one more for a rolling update']) {
      expect(text).toContain(part);
    }
  });

  it('lists nested fields with --recursive', () => {
    const text = run('install-config.platform', true);
    expect(text).toContain('FIELDS (set exactly one):');
    expect(text).toMatch(/\n {8}region <string> -required-/);
    expect(text).toMatch(/\n {12}file <string\(path\)> \(default: "~\/\.aws\/credentials"\)/);
  });

  it('suggests the field meant', () => {
    const error = (() => {
      try {
        run('install-config.machinePools.role');
      } catch (e) {
        return e;
      }
    })();
    expect(error).toBeInstanceOf(UsageError);
    expect((error as UsageError).message).toBe('install-config.machinePools has no field "role"');
    expect((error as UsageError).hint).toBe('did you mean install-config.machinePools.roles?');
  });

  it('refuses what it does not know', () => {
    expect(() => run('cluster')).toThrow(UsageError);
    expect(() => run('install-config.metadata.name.first')).toThrow(/has no field "first"/);
  });

  it('emits the text as a result', () => {
    const sink = new RecordingSink();
    explain({ target: 'install-config.networking', recursive: false, sink });
    expect(sink.ofType('result')[0]).toMatchObject({ kind: 'explain', data: { path: 'install-config.networking' } });
  });
});

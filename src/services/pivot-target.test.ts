/**
 * `--pivot-to self` and `pivot --to self` name the install's own cluster: its kubeconfig in
 * `auth/`, which destroy, create cluster and the self pivot's data removal compare against.
 */
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { pivotTargetKubeconfig, selfTarget } from './pivot.js';

describe('pivotTargetKubeconfig', () => {
  it('self is the install directory\'s own auth/kubeconfig, absolute', () => {
    expect(pivotTargetKubeconfig('demo', selfTarget)).toBe(path.resolve('demo', 'auth', 'kubeconfig'));
  });

  it('anything else is the kubeconfig file it names, resolved', () => {
    expect(pivotTargetKubeconfig('/work/demo', 'mgmt/auth/management.kubeconfig')).toBe(path.resolve('mgmt/auth/management.kubeconfig'));
    expect(pivotTargetKubeconfig('/work/demo', './self')).toBe(path.resolve('self'));
  });
});

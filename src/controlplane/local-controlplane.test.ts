import { afterEach, describe, expect, it, vi } from 'vitest';
import { controlPlaneGoGcEnv } from './components.js';
import { LocalControlPlane } from './local-controlplane.js';

describe('LocalControlPlane', () => {
  afterEach(() => vi.unstubAllEnvs());

  const options = { dir: '/nonexistent/install', etcdBinary: '/nonexistent/etcd', apiServerBinary: '/nonexistent/kube-apiserver', providers: [] };

  it('gives its children GOGC=25 when it outlives the command (detached) and Go’s 100 when it ends with it', () => {
    vi.stubEnv(controlPlaneGoGcEnv, '');
    expect(new LocalControlPlane({ ...options, detached: true }).goRuntime).toEqual({ GOGC: '25' });
    expect(new LocalControlPlane({ ...options, detached: false }).goRuntime).toEqual({ GOGC: '100' });
    expect(new LocalControlPlane(options).goRuntime).toEqual({ GOGC: '100' });
    vi.stubEnv(controlPlaneGoGcEnv, '50');
    expect(new LocalControlPlane({ ...options, detached: true }).goRuntime).toEqual({ GOGC: '50' });
    expect(new LocalControlPlane({ ...options, detached: true, goRuntime: { GOGC: '30' } }).goRuntime).toEqual({ GOGC: '30' });
  });
});

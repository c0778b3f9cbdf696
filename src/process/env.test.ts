import { describe, expect, it } from 'vitest';
import { buildChildEnv } from './env.js';

const source = {
  PATH: '/usr/bin',
  HOME: '/home/u',
  LANG: 'C.UTF-8',
  AWS_SECRET_ACCESS_KEY: 'secret',
  KUBECONFIG: '/home/u/.kube/config',
  HTTPS_PROXY: 'http://proxy:3128',
  NO_PROXY: 'internal.example',
};

describe('buildChildEnv', () => {
  it('passes only the allow-list and always sets NO_PROXY for loopback', () => {
    expect(buildChildEnv({ source })).toEqual({
      PATH: '/usr/bin',
      HOME: '/home/u',
      LANG: 'C.UTF-8',
      NO_PROXY: '127.0.0.1,::1,localhost',
      no_proxy: '127.0.0.1,::1,localhost',
    });
  });

  it('adds allowed names and extras, merging NO_PROXY values', () => {
    const env = buildChildEnv({ source, allow: ['HTTPS_PROXY', 'NO_PROXY'], extra: { GOMAXPROCS: '2', HOME: '/tmp/h' } });
    expect(env.HTTPS_PROXY).toBe('http://proxy:3128');
    expect(env.GOMAXPROCS).toBe('2');
    expect(env.HOME).toBe('/tmp/h');
    expect(env.NO_PROXY).toBe('internal.example,127.0.0.1,::1,localhost');
    expect(env.no_proxy).toBe(env.NO_PROXY);
    expect(env.AWS_SECRET_ACCESS_KEY).toBeUndefined();
    expect(env.KUBECONFIG).toBeUndefined();
  });
});

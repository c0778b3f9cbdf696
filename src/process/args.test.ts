import { describe, expect, it } from 'vitest';
import { hashArgs, renderArgs } from './args.js';

describe('renderArgs', () => {
  it('renders defaults with overrides, sorted by flag name', () => {
    const args = renderArgs(
      { 'secure-port': 6443, 'bind-address': '127.0.0.1', 'enable-admission-plugins': ['A', 'B'], 'allow-privileged': true, v: 2 },
      { v: 4, 'secure-port': null, profiling: false },
    );
    expect(args).toEqual([
      '--allow-privileged',
      '--bind-address=127.0.0.1',
      '--enable-admission-plugins=A',
      '--enable-admission-plugins=B',
      '--profiling=false',
      '--v=4',
    ]);
  });

  it('does not depend on the order keys were added', () => {
    expect(renderArgs({ b: '2', a: '1' })).toEqual(renderArgs({ a: '1', b: '2' }));
  });

  it('refuses flag names with dashes or =', () => {
    expect(() => renderArgs({ '--v': 2 })).toThrow(/no dashes/);
    expect(() => renderArgs({ 'a=b': 2 })).toThrow(/no dashes/);
  });

  it('hashes binary and args', () => {
    expect(hashArgs('/bin/etcd', ['--a=1'])).toMatch(/^[0-9a-f]{64}$/);
    expect(hashArgs('/bin/etcd', ['--a=1'])).not.toBe(hashArgs('/bin/etcd', ['--a=2']));
    expect(hashArgs('/bin/etcd', ['--a=1', '--b'])).not.toBe(hashArgs('/bin/etcd', ['--a=1 --b']));
  });
});

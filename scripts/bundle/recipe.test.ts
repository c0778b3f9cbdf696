import { describe, expect, it } from 'vitest';
import { binaryRecipes, builtFor } from './recipe.js';

describe('binary recipes', () => {
  it('build the flannel binaries for Linux only, everything else for every target', () => {
    const names = (goos: 'linux' | 'darwin') => binaryRecipes.filter((r) => builtFor(r, { goos, goarch: 'arm64' })).map((r) => r.name);
    expect(names('linux')).toEqual(binaryRecipes.map((r) => r.name));
    expect(binaryRecipes.map((r) => r.name).filter((n) => !names('darwin').includes(n))).toEqual(['flanneld', 'flannel']);
  });

  it('ship the cluster add-ons and keep agnhost for tests', () => {
    const shipped = (name: string) => binaryRecipes.find((r) => r.name === name)?.shipped;
    expect(['coredns', 'flanneld', 'flannel'].map(shipped)).toEqual([true, true, true]);
    expect(shipped('agnhost')).toBe(false);
  });
});

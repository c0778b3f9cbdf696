import { describe, expect, it } from 'vitest';
import { everythingExcept } from './build.js';
import { binaryRecipes } from './recipe.js';

describe('bundle --except', () => {
  it('selects every binary and the userland layer but those named', () => {
    const selected = everythingExcept(new Set(['e2e.test']));
    expect(selected.has('e2e.test')).toBe(false);
    expect(selected.has('userland')).toBe(true);
    expect([...selected].sort()).toEqual([...binaryRecipes.map((r) => r.name).filter((n) => n !== 'e2e.test'), 'userland'].sort());
    expect(everythingExcept(new Set(['userland'])).has('userland')).toBe(false);
  });

  it('refuses a name that is neither a binary nor the layer, naming the known ones', () => {
    expect(() => everythingExcept(new Set(['e2e-test']))).toThrow(/--except: unknown binary e2e-test; known: etcd, kube, .*e2e\.test, userland/);
  });
});

import { readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';

/** Every `require` of a go.mod (single lines and blocks), module path → version. */
async function requires(wrapper: string): Promise<Map<string, string>> {
  const text = await readFile(new URL(`../../embedded/modules/${wrapper}/go.mod`, import.meta.url), 'utf8');
  const found = new Map<string, string>();
  let inBlock = false;
  for (const raw of text.split('\n')) {
    const line = raw.replace(/\/\/.*$/, '').trim();
    if (line === 'require (') inBlock = true;
    else if (inBlock && line === ')') inBlock = false;
    else {
      const fields = (inBlock ? line : line.startsWith('require ') ? line.slice('require '.length) : '').split(/\s+/);
      if (fields.length === 2 && fields[0] && fields[1]) found.set(fields[0], fields[1]);
    }
  }
  return found;
}

describe('wrapper modules', () => {
  // A package compiles once for both only when every module below it has the same version in
  // both graphs; one differing golang.org/x/sys recompiles everything above it (docs/benchmarks.md,
  // "Build times and sizes").
  it('CAPV requires every module it shares with CAPA at CAPA\'s version, so their common packages compile once', async () => {
    const [capa, capv] = await Promise.all([requires('capa'), requires('capv')]);
    const shared = [...capv.keys()].filter((m) => capa.has(m));
    expect(shared).toContain('sigs.k8s.io/controller-runtime');
    expect(shared).toContain('golang.org/x/sys');
    expect(shared.filter((m) => capa.get(m) !== capv.get(m)).map((m) => `${m}: capa ${capa.get(m)}, capv ${capv.get(m)}`)).toEqual([]);
  });
});

import { readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';

/** The modules a wrapper shares with another at a version of its own, as `module: ours, theirs`. */
async function differing(ours: string, theirs: string): Promise<string[]> {
  const [a, b] = await Promise.all([requires(ours), requires(theirs)]);
  return [...a.keys()].filter((m) => b.has(m) && a.get(m) !== b.get(m)).map((m) => `${m}: ${ours} ${a.get(m)}, ${theirs} ${b.get(m)}`);
}

/** Every `require` of a go.mod (single lines and blocks), module path → version; a wrapper's, or provider/'s. */
async function requires(wrapper: string): Promise<Map<string, string>> {
  const dir = wrapper === 'provider' ? '../../provider' : `../../embedded/modules/${wrapper}`;
  const text = await readFile(new URL(`${dir}/go.mod`, import.meta.url), 'utf8');
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
    expect(await differing('capv', 'capa')).toEqual([]);
  });

  // capi-manager is bundled before CoreDNS and flanneld (recipe.ts). Measured 2026-12-05 from a Go build cache
  // holding capi-manager's packages: CoreDNS compiled in 74.5 s at its own versions, 13.2 s at capi-manager's.
  it('CoreDNS and flannel require every module they share with capi-manager at its version, but for their own CoreDNS parser and etcd client', async () => {
    const [capi, coredns, flannel] = await Promise.all([requires('capi'), requires('coredns'), requires('flannel')]);
    for (const shared of [coredns, flannel]) {
      expect(shared.get('k8s.io/client-go')).toBe(capi.get('k8s.io/client-go'));
      expect(shared.get('golang.org/x/sys')).toBe(capi.get('golang.org/x/sys'));
    }
    // CoreDNS needs a newer Corefile parser (caddy) than the one Cluster API's corefile-migration pins; flannel's
    // etcd backend takes etcd's v3.7 client, and Cluster API's control plane talks to its etcd with v3.6's.
    expect(await differing('coredns', 'capi')).toEqual([expect.stringMatching(/^github\.com\/coredns\/caddy: /)]);
    expect((await differing('flannel', 'capi')).map((d) => d.split(':')[0])).toEqual(['go.etcd.io/etcd/api/v3', 'go.etcd.io/etcd/client/pkg/v3', 'go.etcd.io/etcd/client/v3']);
  });

  // capa-manager is bundled after capi-manager. Measured 2026-12-05 from a Go build cache holding capi-manager's
  // packages: CAPA compiled in 283.9 s at its own versions, 239.7 s with these at capi-manager's.
  it('CAPA requires every module it shares with capi-manager at its version, but for the Kubernetes libraries, controller-runtime and Cluster API it is released with', async () => {
    // cel-go pairs with k8s.io/apiserver; CAPA needs a newer golang.org/x/exp than Cluster API's; gomega is not built.
    const releasedWith = /^(k8s\.io\/|sigs\.k8s\.io\/|github\.com\/google\/cel-go:|github\.com\/onsi\/gomega:|golang\.org\/x\/exp:)/;
    const differ = await differing('capa', 'capi');
    expect(differ.filter((d) => !releasedWith.test(d))).toEqual([]);
    expect(differ).toContainEqual(expect.stringMatching(/^sigs\.k8s\.io\/cluster-api: capa v1\.13/));
  });

  // The go tier tests provider/ with the bundle's Go flags (scripts/ci/run-tests.mjs goTierEnv), so the packages
  // capi-manager compiled (it links provider/ through a replace) are taken from Go's build cache.
  it('provider/ requires every module it shares with capi-manager at its version', async () => {
    expect(await differing('provider', 'capi')).toEqual([]);
  });
});

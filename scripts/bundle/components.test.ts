import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { parseAllDocuments } from 'yaml';
import { describe, expect, it } from 'vitest';
import { assembleComponents } from './components.js';
import { componentRecipes, type ComponentsRecipe } from './recipe.js';

const repositoryRoot = path.join(import.meta.dirname, '..', '..');
/** Cluster API's module as the bundle builds from it (its wrapper pins this version). */
const capiModule = 'cluster-api@v1.14.2';

const documents = (text: string) => parseAllDocuments(text).map((d) => d.toJSON() as { kind?: string; metadata?: { name?: string; labels?: Record<string, string> }; rules?: unknown[] });
const recipe = (provider: string): ComponentsRecipe => componentRecipes.find((r) => r.provider === provider)!;

/** The manager ClusterRole the components of `r` carry, and the rules of its source's role.yaml. */
async function carriedAndSource(r: ComponentsRecipe, moduleDir: string): Promise<{ carried: ReturnType<typeof documents>[number] | undefined; source: unknown[] }> {
  const assembled = await assembleComponents(r, moduleDir, 'v0.0.0-test');
  const carried = documents(assembled.yaml).find((d) => d.kind === 'ClusterRole');
  const source = documents(readFileSync(path.join(moduleDir, r.managerRole!), 'utf8')).find((d) => d.kind === 'ClusterRole')!.rules!;
  return { carried, source };
}

describe("the components carry each pod-run provider's manager ClusterRole, from its own role.yaml", () => {
  it('names exactly the providers management install runs as pods', () => {
    expect(componentRecipes.filter((r) => r.managerRole).map((r) => r.provider)).toEqual(['cluster-api', 'bootstrap-kubeadm', 'control-plane-kubeadm', 'agent-provisioner']);
  });

  it("the agent provider's: this repository's provider/config/rbac/role.yaml, with clusterctl's labels", async () => {
    const { carried, source } = await carriedAndSource(recipe('agent-provisioner'), path.join(repositoryRoot, 'provider'));
    expect(carried?.metadata).toEqual({ name: 'agent-provisioner-manager-role', labels: { 'cluster.x-k8s.io/provider': 'agent-provisioner', 'clusterctl.cluster.x-k8s.io': '' } });
    expect(carried?.rules).toEqual(source);
    expect(source.length).toBeGreaterThan(5);
  });

  it("Cluster API's core, kubeadm bootstrap and control plane: their role.yaml files, where the Go module cache has the bundled version", async () => {
    const moduleDir = path.join(execFileSync('go', ['env', 'GOMODCACHE'], { encoding: 'utf8' }).trim(), 'sigs.k8s.io', capiModule);
    // CI builds the bundle from that module, so there it is always in the cache: a missing one fails there.
    expect(existsSync(moduleDir) || !process.env.CI, `${moduleDir} is missing; npm run setup builds from it`).toBe(true);
    if (!existsSync(moduleDir)) return; // a machine that never built the bundle: nothing to assemble from
    for (const provider of ['cluster-api', 'bootstrap-kubeadm', 'control-plane-kubeadm']) {
      const { carried, source } = await carriedAndSource(recipe(provider), moduleDir);
      expect(carried?.metadata?.name, provider).toBe(`${provider}-manager-role`);
      expect(carried?.rules, provider).toEqual(source);
    }
  });
});

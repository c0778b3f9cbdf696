import { readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { apiServerEnv, controllerEnv } from '../../src/controlplane/components.js';
import { coreControllers, localReconcileRateLimitInterval } from '../../src/platforms/platform.js';
import { addedFiles, bindAddressEnv, patchesFor, rateLimitIntervalVariable, skipOpenApiV2Env, sourcePatches } from './patches.js';

/** The Go a patch adds for one module: its edits' replacements and its added files. */
function goAddedFor(module: string): string {
  const edits = sourcePatches.filter((p) => p.module === module).flatMap((p) => p.edits.map((e) => e.replace));
  const files = addedFiles.filter((a) => a.module === module).map((a) => a.content);
  return [...edits, ...files].join('\n');
}

describe('source patches and the environment the local control plane sets', () => {
  it('kube-apiserver gets the variable its OpenAPI patch reads, with the value it compares against', () => {
    expect(apiServerEnv()[skipOpenApiV2Env]).toBe('true');
    expect(goAddedFor('k8s.io/kubernetes')).toContain(`os.Getenv("${skipOpenApiV2Env}") == "true"`);
  });

  it('the in-memory mux holds the port it picks and hands that listener over: every helper its edits call is defined once, nothing checks a port and closes it', () => {
    const mux = sourcePatches.find((p) => p.file === 'infrastructure/inmemory/pkg/server/mux.go')!;
    const calls = mux.edits.map((e) => e.replace).join('\n');
    const helpers = addedFiles.find((a) => a.file === 'infrastructure/inmemory/pkg/server/provisioner_listen.go')!.content;
    for (const helper of ['provisionerFirstPort', 'provisionerHoldPort', 'provisionerListen', 'provisionerReleasePort']) {
      expect(calls, helper).toContain(`${helper}(`);
      expect(helpers.match(new RegExp(`^func ${helper}\\(`, 'gm')), helper).toHaveLength(1);
    }
    // Both upstream listens of a workload cluster's port take the held listener.
    expect(mux.edits.find((e) => e.replace === 'provisionerListen(wcl.Port())')?.count).toBe(2);
    expect(helpers).not.toContain('provisionerPortFree');
    // The search wraps around the range and never takes a port of the mux's own clusters.
    expect(calls).toContain('port = m.minPort');
    expect(calls).toContain('!ours && provisionerHoldPort(port)');
  });

  it('an API server whose listen failed is unregistered, so the machine controller adds it (and listens) again', () => {
    const mux = sourcePatches.find((p) => p.file === 'infrastructure/inmemory/pkg/server/mux.go')!;
    const index = mux.edits.findIndex((e) => e.replace.includes('wcl.apiServers.Delete(podName)'));
    const edit = mux.edits[index]!;
    // It finds the listen as the hand-over edit before it left it, in AddAPIServer (whose error check is two tabs
    // deep; StartListener's, which knows no pod, is one), and unregisters before upstream's error return.
    expect(mux.edits.findIndex((e) => e.replace === 'provisionerListen(wcl.Port())')).toBeLessThan(index);
    expect(edit.find).toBe('provisionerListen(wcl.Port()) //nolint:noctx\n\t\tif err != nil {\n');
    expect(edit.replace).toBe(`${edit.find}\t\t\twcl.apiServers.Delete(podName)\n`);
  });

  it('the providers get the bind address their webhook-server patch reads', () => {
    expect(Object.keys(controllerEnv())).toContain(bindAddressEnv);
    expect(goAddedFor('sigs.k8s.io/controller-runtime')).toContain(`os.Getenv("${bindAddressEnv}")`);
  });

  it("Cluster API's rate-limit interval: the capi wrapper alone takes the patch, its main sets the variable from the flag the local control plane passes", async () => {
    const capi = patchesFor('capi', 'sigs.k8s.io/cluster-api');
    expect(capi.patches.map((p) => p.file)).toEqual(['util/controller/builder.go']);
    expect(capi.patches[0]!.edits[0]!.replace).toContain(`rateLimitInterval := ${rateLimitIntervalVariable}\n`);
    expect(capi.added.map((a) => a.content)).toEqual([expect.stringContaining(`var ${rateLimitIntervalVariable} = time.Second\n`)]);
    // CAPA and CAPV build against another Cluster API and set nothing: their builds take neither.
    for (const wrapper of ['capa', 'capv']) expect(patchesFor(wrapper, 'sigs.k8s.io/cluster-api')).toEqual({ patches: [], added: [] });
    // A patch that names no wrapper still reaches every wrapper with the module.
    expect(patchesFor('capa', 'sigs.k8s.io/controller-runtime').patches).toHaveLength(1);

    const main = await readFile(new URL('../../embedded/modules/capi/main.go', import.meta.url), 'utf8');
    expect(main).toContain(`capicontroller.${rateLimitIntervalVariable} = opts.rateLimitInterval`);
    expect(main).toContain('fs.DurationVar(&o.rateLimitInterval, "reconcile-rate-limit-interval", time.Second,');
    const core = coreControllers().find((c) => c.provider === 'cluster-api')!;
    expect(core.args).toEqual({ 'reconcile-rate-limit-interval': localReconcileRateLimitInterval });
    expect(localReconcileRateLimitInterval).toBe('100ms');
  });
});

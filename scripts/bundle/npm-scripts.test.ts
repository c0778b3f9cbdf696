import { readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';

/** The package's npm scripts, and every command a script runs through `npm run` expanded into it. */
async function expandedScripts(): Promise<(name: string) => string> {
  const { scripts } = JSON.parse(await readFile(new URL('../../package.json', import.meta.url), 'utf8')) as { scripts: Record<string, string> };
  const expand = (name: string, depth = 0): string => {
    const body = scripts[name];
    if (body === undefined) throw new Error(`no npm script ${name}`);
    if (depth > 5) throw new Error(`npm script ${name} recurses`);
    return body.replace(/npm run ([\w:-]+)( -- ([^&|;)]*))?/g, (_all, inner: string, _dash, args: string | undefined) => `(${expand(inner, depth + 1)}${args ? ` ${args.trim()}` : ''})`);
  };
  return expand;
}

describe('npm scripts', () => {
  it('demo builds only the binaries a release ships (no kubectl, no clusterctl)', async () => {
    const demo = (await expandedScripts())('demo');
    const bundleRuns = demo.match(/tsx scripts\/bundle\/build\.ts[^)&|;]*/g) ?? [];
    expect(bundleRuns.length).toBeGreaterThan(0);
    for (const run of bundleRuns) expect(run).toContain('--release');
  });

  it('the test setup still builds the development tools the tests use', async () => {
    const setup = (await expandedScripts())('setup');
    const bundleRuns = setup.match(/tsx scripts\/bundle\/build\.ts[^)&|;]*/g) ?? [];
    expect(bundleRuns.length).toBe(1);
    expect(bundleRuns[0]).not.toContain('--release');
  });
});

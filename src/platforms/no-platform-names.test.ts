/**
 * Everything platform-specific lives in src/platforms/<name>/: the rest of the product —
 * cli, services, config and every other module under src/ — reaches a platform only
 * through the registry, so it never names one. The rule this test enforces:
 *
 *   no source file under src/ outside src/platforms/, tests excepted, names a platform,
 *
 * where the names come from the registry itself, so a new platform is checked as soon as
 * it is listed: its name and its controllers' short names (`capd`) as words of any case
 * (`isInmemory`, `PROVISIONER_INMEMORY_…` and `'aws'` all count), and its kinds, provider
 * names, binaries and namespaces as they are written (`DevMachineTemplate` contains
 * `DevMachine`). Comments count too: a module that explains what a platform does knows it.
 *
 * Tests (`*.test.ts[x]`) and test/ are outside the rule: they exercise named platforms on
 * purpose. So is scripts/: the bundle recipe is the list of binaries to build, and the
 * benchmarks drive one platform by design.
 */
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { coreControllers, sharedControllers } from './platform.js';
import { platforms } from './registry.js';

const srcRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/**
 * The only exception, by file and word: recognising AWS access keys in logs is secret
 * scrubbing, which runs on every bundle whatever the platform (a user's shell or hook can
 * print a key on any install).
 */
const allowed: Readonly<Record<string, readonly string[]>> = {
  'gather/redact.ts': ['aws'],
  'gather/collect.ts': ['aws'],
};

/**
 * Platform names that are also the product's words for something every platform has,
 * allowed everywhere: `hosts` is the `provisioner hosts` command group and the node
 * agent's inventory, which any management cluster serves. The platform's kinds, provider
 * and namespaces stay forbidden.
 */
const sharedWords: Readonly<Record<string, string>> = {
  hosts: 'the `provisioner hosts` commands and the node agent serve every platform',
};

/** The words of a text: split at anything not a letter or digit, and at camelCase humps (`AWSCluster` → AWS, Cluster). */
function words(text: string): string[] {
  return text
    .replace(/([a-z0-9])([A-Z])/g, '$1 $2')
    .replace(/([A-Z]+)([A-Z][a-z])/g, '$1 $2')
    .split(/[^A-Za-z0-9]+/)
    .filter(Boolean)
    .map((w) => w.toLowerCase());
}

interface Forbidden {
  /** Matched as whole words, any case. */
  words: Set<string>;
  /** Matched as written, anywhere. */
  names: Set<string>;
}

/** What names a platform, from the registry. */
function forbiddenNames(): Forbidden {
  // Core controllers run on every platform; shared ones serve features outside platforms too.
  const core = new Set([...coreControllers(), ...sharedControllers()].map((c) => c.binary));
  const forbidden: Forbidden = { words: new Set(), names: new Set() };
  for (const platform of platforms) {
    if (!(platform.name.toLowerCase() in sharedWords)) forbidden.words.add(platform.name.toLowerCase());
    const kinds = [
      platform.infrastructure.clusterKind,
      platform.infrastructure.machineTemplateKind,
      ...(platform.clusterClass ? [platform.clusterClass.clusterTemplateKind] : []),
      ...platform.prunableKinds.map((k) => k.kind),
      ...platform.lifecycle.stateKinds.map((k) => k.kind),
    ];
    for (const kind of kinds) forbidden.names.add(kind);
    for (const controller of platform.controllers.filter((c) => !core.has(c.binary))) {
      forbidden.names.add(controller.binary);
      forbidden.names.add(controller.provider);
      forbidden.words.add(controller.binary.split('-')[0]!.toLowerCase());
    }
    for (const namespace of platform.installConfig.providerNamespaces) forbidden.names.add(namespace);
  }
  return forbidden;
}

/** The platform names `text` contains, minus those `allowedWords` lets through. */
function platformNamesIn(text: string, forbidden: Forbidden, allowedWords: readonly string[] = []): string[] {
  const found = new Set<string>();
  for (const word of words(text)) if (forbidden.words.has(word) && !allowedWords.includes(word)) found.add(word);
  for (const name of forbidden.names) if (text.includes(name) && !words(name).every((w) => allowedWords.includes(w))) found.add(name);
  return [...found].sort();
}

async function productSources(dir: string): Promise<string[]> {
  const files: string[] = [];
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) {
      if (full !== path.join(srcRoot, 'platforms')) files.push(...(await productSources(full)));
    } else if (/\.tsx?$/.test(entry.name) && !/\.test\.tsx?$/.test(entry.name)) {
      files.push(full);
    }
  }
  return files;
}

describe('no file outside src/platforms names a platform', () => {
  it('derives the names from the registry', () => {
    const forbidden = forbiddenNames();
    for (const platform of platforms) if (!(platform.name.toLowerCase() in sharedWords)) expect(forbidden.words).toContain(platform.name.toLowerCase());
    expect(forbidden.names.size).toBeGreaterThanOrEqual(platforms.length * 2);
  });

  it('finds a name however it is written, and nothing in ordinary words', () => {
    const forbidden = forbiddenNames();
    const name = platforms[0]!.name;
    const camel = `is${name[0]!.toUpperCase()}${name.slice(1)}`;
    expect(platformNamesIn(`const ${camel} = true;`, forbidden)).toEqual([name.toLowerCase()]);
    expect(platformNamesIn(`PROVISIONER_${name.toUpperCase()}_PORT`, forbidden)).toEqual([name.toLowerCase()]);
    expect(platformNamesIn(`kind: '${platforms[0]!.infrastructure.machineTemplateKind}'`, forbidden).length).toBeGreaterThan(0);
    expect(platformNamesIn('the live view redraws; applies the desired set', forbidden)).toEqual([]);
  });

  it('holds for every non-test source file under src/ outside src/platforms', async () => {
    const forbidden = forbiddenNames();
    const offenders: string[] = [];
    for (const file of await productSources(srcRoot)) {
      const relative = path.relative(srcRoot, file).split(path.sep).join('/');
      const names = platformNamesIn(await readFile(file, 'utf8'), forbidden, allowed[relative] ?? []);
      if (names.length > 0) offenders.push(`src/${relative}: ${names.join(', ')}`);
    }
    // Move what names a platform into its folder (src/platforms/<name>/) behind the Platform interface.
    expect(offenders).toEqual([]);
  });
});

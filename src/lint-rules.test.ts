/**
 * The import rules of eslint.config.js, run through ESLint's own API on planted files, so a
 * rule that stops matching (a block later in the config overriding it, a glob gone stale)
 * fails here instead of letting violations through quietly.
 */
import { fileURLToPath } from 'node:url';
import { ESLint } from 'eslint';
import { describe, expect, it } from 'vitest';

const repoRoot = fileURLToPath(new URL('..', import.meta.url));
const eslint = new ESLint({ cwd: repoRoot });

/** The messages of the rule `no-restricted-imports` for `code` planted at `file`. */
async function restrictedImports(file: string, code: string): Promise<string[]> {
  const [result] = await eslint.lintText(code, { filePath: `${repoRoot}${file}` });
  return (result?.messages ?? []).filter((m) => m.ruleId === 'no-restricted-imports').map((m) => m.message);
}

describe('timers/promises belongs to the waiting and concurrency modules', () => {
  const planted = `import { setTimeout as sleep } from 'node:timers/promises';\nimport { setImmediate } from 'timers/promises';\nexport const nap = () => Promise.all([sleep(1), setImmediate()]);\n`;

  it.each(['src/pivot/planted.ts', 'src/services/planted.ts', 'src/process/planted.ts', 'src/cli/planted.ts', 'src/config/planted.ts', 'src/kube/planted.ts', 'src/planted.ts', 'src/pivot/planted.test.ts', 'scripts/bench/planted.ts', 'test/support/planted.ts'])(
    'refuses both spellings in %s',
    async (file) => {
      const messages = await restrictedImports(file, planted);
      expect(messages).toHaveLength(2);
      expect(messages[0]).toContain('progress/until');
    },
  );

  it.each(['src/progress/planted.ts', 'src/concurrency.ts'])('allows them in %s', async (file) => {
    expect(await restrictedImports(file, planted)).toEqual([]);
  });

  it('keeps the layer rules of the blocks it joined', async () => {
    expect(await restrictedImports('src/progress/planted.ts', `import '../kube/client.js';\n`)).toHaveLength(1);
    expect(await restrictedImports('src/pivot/planted.ts', `import '../services/pivot.js';\n`)).toHaveLength(1);
  });
});

describe('only installdir/ names .provisioner inside an install directory', () => {
  /** The messages of `no-restricted-syntax` for `code` planted at `file`. */
  async function restrictedSyntax(file: string, code: string): Promise<string[]> {
    const [result] = await eslint.lintText(code, { filePath: `${repoRoot}${file}` });
    return (result?.messages ?? []).filter((m) => m.ruleId === 'no-restricted-syntax').map((m) => m.message);
  }
  const planted = "import path from 'node:path';\nexport const a = (dir: string) => path.join(dir, '.provisioner', 'x.json');\nexport const b = (dir: string) => `${dir}/.provisioner/y.json`;\n";

  it.each(['src/services/planted.ts', 'src/pivot/planted.ts', 'src/cli/commands/planted.ts'])('refuses a string and a template naming it in %s', async (file) => {
    const messages = await restrictedSyntax(file, planted);
    expect(messages).toHaveLength(2);
    expect(messages[0]).toContain('src/installdir/paths.ts');
  });

  it('allows it in installdir/ and leaves API groups such as agent.provisioner.dev alone', async () => {
    expect(await restrictedSyntax('src/installdir/planted.ts', planted)).toEqual([]);
    expect(await restrictedSyntax('src/services/planted.ts', "export const group = 'agent.provisioner.dev';\nexport const lock = '.provisioner.lock';\n")).toEqual([]);
  });
});

describe('services are leaves', () => {
  it.each([`import { pivotFrom } from './pivot.js';\n`, `import type { PivotResult } from '../services/pivot.js';\n`])('refuses a service importing a service: %s', async (code) => {
    const messages = await restrictedImports('src/services/planted.ts', code);
    expect(messages).toHaveLength(1);
    expect(messages[0]).toContain('never imports another service');
  });

  it('keeps the rules of the block it joined, and lets a service use domain modules and its own test import it', async () => {
    expect(await restrictedImports('src/services/planted.ts', `import '@kubernetes/client-node';\n`)).toHaveLength(1);
    expect(await restrictedImports('src/services/planted.ts', `import { setTimeout } from 'node:timers/promises';\n`)).toHaveLength(1);
    expect(await restrictedImports('src/services/planted.ts', `import { pivotFrom } from '../pivot/from.js';\nimport { attachManagement } from '../management/attach.js';\n`)).toEqual([]);
    expect(await restrictedImports('src/services/planted.test.ts', `import { pivot } from './pivot.js';\n`)).toEqual([]);
  });
});

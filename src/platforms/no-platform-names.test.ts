/**
 * The lint rule that keeps every platform in its folder (`provisioner/no-platform-names`,
 * eslint.config.js): no source file under src/ outside src/platforms/, tests excepted, names
 * a platform. `npm run lint` enforces it on the sources; here it is shown to fail on planted
 * violations, with the project's own ESLint configuration.
 */
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ESLint } from 'eslint';
import { beforeAll, describe, expect, it } from 'vitest';
import { forbiddenPlatformNames, sharedPlatformWords } from './forbidden-names.js';
import { platforms } from './registry.js';

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const ruleId = 'provisioner/no-platform-names';

let eslint: ESLint;

/** The platform names the rule reports in `code` as the file `file` (relative to the repository). */
async function namesReported(code: string, file: string): Promise<string[]> {
  const [result] = await eslint.lintText(code, { filePath: path.join(repoRoot, file) });
  return result!.messages.filter((m) => m.ruleId === ruleId).map((m) => m.message.match(/^"([^"]+)"/)?.[1] ?? m.message);
}

// Loading the configuration compiles the registry through tsx: seconds on a loaded machine.
describe('lint: no file outside src/platforms names a platform', { timeout: 60_000 }, () => {
  beforeAll(() => {
    eslint = new ESLint({ cwd: repoRoot });
  });

  it('takes the names from the registry', () => {
    const forbidden = forbiddenPlatformNames();
    for (const platform of platforms) if (!(platform.name.toLowerCase() in sharedPlatformWords)) expect(forbidden.words).toContain(platform.name.toLowerCase());
    for (const platform of platforms) expect(forbidden.names).toContain(platform.infrastructure.machineTemplateKind);
  });

  it('fails a planted violation in a service however the name is written: identifier, variable name, kind, comment', async () => {
    const [platform] = platforms;
    const name = platform!.name;
    const planted = [
      `export const is${name[0]!.toUpperCase()}${name.slice(1)} = true;`,
      `export const port = process.env.PROVISIONER_${name.toUpperCase()}_PORT;`,
      `export const kind = '${platform!.infrastructure.machineTemplateKind}';`,
      `// the ${name} machines live in the controller`,
    ];
    for (const line of planted) expect(await namesReported(line, 'src/services/planted.ts'), line).not.toEqual([]);
    expect(await namesReported('// the live view redraws; applies the desired set\nexport const hosts = 1;\n', 'src/services/planted.ts')).toEqual([]);
  });

  it('lets the platform folders and tests name platforms', async () => {
    const platform = platforms[0]!;
    const code = `export const kind = '${platform.infrastructure.machineTemplateKind}'; // ${platform.name}\n`;
    expect(await namesReported(code, 'src/services/planted.ts')).not.toEqual([]);
    expect(await namesReported(code, `src/platforms/${platform.name}/planted.ts`)).toEqual([]);
    expect(await namesReported(code, 'src/services/planted.test.ts')).toEqual([]);
  });

  it('lets secret scrubbing recognise AWS keys, and nothing else of that platform', async () => {
    const aws = platforms.find((p) => p.name === 'aws')!;
    expect(await namesReported('// AWS access key ids start with AKIA\n', 'src/gather/redact.ts')).toEqual([]);
    expect(await namesReported(`export const kind = '${aws.infrastructure.clusterKind}';\n`, 'src/gather/redact.ts')).toEqual([aws.infrastructure.clusterKind]);
  });
});

/**
 * The install config as an asset. It is the user's input: read from
 * `<dir>/install-config.yaml` and validated with every platform's rules; never
 * generated here (`create install-config` writes it through `newInstallConfigAsset`).
 */
import path from 'node:path';
import { stringify } from 'yaml';
import { ConfigError } from '../errors.js';
import { log } from '../events.js';
import {
  installConfigFile,
  installConfigFileName,
  loadInstallConfigText,
  newInstallConfigDocument,
  toJsonSchema,
  type InstallConfig,
  type NewInstallConfigAnswers,
} from '../config/index.js';
import { installConfigSchema, platformNamed } from '../platforms/index.js';
import type { FieldProblem } from '../errors.js';
import type { Asset, AssetContext } from './asset.js';
import { parseYamlDocument, readInputText } from '../input-files.js';
import { sha256 } from './files.js';
import { exists } from '../files.js';
import { stateDirName } from '../installdir/paths.js';

export interface LoadedInstallConfig {
  config: InstallConfig;
  warnings: FieldProblem[];
  /** The file's text and its sha256, as read. */
  text: string;
  sha256: string;
}

/** Where `create install-config` writes the JSON Schema copy that the modeline points to. */
export const schemaCopyPath = `${stateDirName}/install-config.schema.json`;

/** The first line of a written install config: editors with yaml-language-server complete and check it. */
const schemaModeline = `# yaml-language-server: $schema=${schemaCopyPath}`;

export function installConfigJsonSchema(): Record<string, unknown> {
  return {
    $schema: 'http://json-schema.org/draft-07/schema#',
    title: 'provisioner install config',
    ...toJsonSchema(installConfigSchema.root),
  };
}

export const installConfigAsset: Asset<LoadedInstallConfig> = {
  name: 'install-config',
  dependencies: [],
  async generate(_parents, ctx) {
    return { value: await loadInstallConfigFile(ctx.dir, ctx.sink), files: [] };
  },
};

/** Reads `<dir>/install-config.yaml` (refused when missing), validates it and logs its warnings: the one loader every command goes through. */
async function loadInstallConfigFile(dir: string, sink: AssetContext['sink']): Promise<LoadedInstallConfig> {
  const file = path.join(dir, installConfigFileName);
  const text = await readInputText(file, installConfigFile);
  if (text === undefined) throw missingInstallConfig(dir);
  return validatedInstallConfig(text, dir, sink);
}

/**
 * Refuses an install directory without its install-config.yaml before a command records
 * anything there (`create cluster`'s first run): the same error the loader gives, earlier.
 */
export async function requireInstallConfigFile(dir: string): Promise<void> {
  if (!(await exists(path.join(dir, installConfigFileName)))) throw missingInstallConfig(dir);
}

/** The error for an install directory without its install-config.yaml, with how to write one. */
function missingInstallConfig(dir: string): ConfigError {
  return new ConfigError(`${path.join(dir, installConfigFileName)} does not exist`, [], { hint: `run \`provisioner create install-config --dir ${dir}\` to write one` });
}

async function validatedInstallConfig(text: string, dir: string, sink: AssetContext['sink']): Promise<LoadedInstallConfig> {
  const file = path.join(dir, installConfigFileName);
  const { config, warnings } = await loadInstallConfigText(text, { dir, schema: installConfigSchema, fileName: file });
  for (const warning of warnings) {
    log(sink, 'warn', `${installConfigFileName}: ${warning.path}: ${warning.message}${warning.hint ? ` (${warning.hint})` : ''}`);
  }
  return { config, warnings, text, sha256: sha256(text) };
}

/** Renders the install config a user would write for these answers, with the schema modeline. */
export function renderNewInstallConfig(answers: NewInstallConfigAnswers): string {
  const platform = platformNamed(answers.platform);
  const section = platform.newSection(answers.platformAnswers);
  const bootstrap = platform.newBootstrapSection?.(answers.platformAnswers);
  return `${schemaModeline}\n${stringify(newInstallConfigDocument(answers, section, bootstrap), { lineWidth: 0 })}`;
}

/** `create install-config`: writes install-config.yaml (validated first) and the schema copy its modeline names. */
export function newInstallConfigAsset(answers: NewInstallConfigAnswers): Asset<LoadedInstallConfig> {
  return {
    name: 'new-install-config',
    dependencies: [],
    async generate(_parents, ctx) {
      const text = renderNewInstallConfig(answers);
      // Validate what we are about to write: answers go through the same rules as a hand-written file.
      const { config, warnings } = await loadInstallConfigText(text, { dir: ctx.dir, schema: installConfigSchema });
      for (const warning of warnings) log(ctx.sink, 'warn', `${warning.path}: ${warning.message}${warning.hint ? ` (${warning.hint})` : ''}`);
      return {
        value: { config, warnings, text, sha256: sha256(text) },
        files: [
          { path: installConfigFileName, content: text },
          { path: schemaCopyPath, content: JSON.stringify(installConfigJsonSchema(), null, 2) + '\n' },
        ],
      };
    },
  };
}

/**
 * The install config of `dir` as every command after `create cluster`'s first run reads it:
 * validated, nothing regenerated or written. A command reads it once and hands the config on
 * (to the asset store too: `AssetStore.open({ installConfig })`).
 */
export async function loadInstallConfig(options: { dir: string; sink: AssetContext['sink'] }): Promise<LoadedInstallConfig> {
  return loadInstallConfigFile(options.dir, options.sink);
}

/** `loadInstallConfig`'s config alone. */
export async function readInstallConfig(options: { dir: string; sink: AssetContext['sink'] }): Promise<InstallConfig> {
  return (await loadInstallConfigFile(options.dir, options.sink)).config;
}

/**
 * The install config, or why it cannot be used and the document as written: undefined when
 * there is no file or it is no YAML (`unparsable`, the parse error being the problem).
 */
export type InstallConfigRead = { config: InstallConfig } | { problem: unknown; document: unknown; unparsable: boolean };

/**
 * The install config of `dir` read once for a command that goes on without a valid one
 * (pivot, destroy): the validated config, or the problem and the document as written (its
 * platform may still be named).
 */
export async function readInstallConfigOrProblem(options: { dir: string; sink: AssetContext['sink'] }): Promise<InstallConfigRead> {
  const file = path.join(options.dir, installConfigFileName);
  let text: string | undefined;
  try {
    text = await readInputText(file, installConfigFile);
    if (text === undefined) return { problem: missingInstallConfig(options.dir), document: undefined, unparsable: false };
    return { config: (await validatedInstallConfig(text, options.dir, options.sink)).config };
  } catch (problem) {
    if (text === undefined) return { problem, document: undefined, unparsable: false };
    try {
      return { problem, document: parseYamlDocument(text, file, installConfigFile).value, unparsable: false };
    } catch (parseError) {
      return { problem: parseError, document: undefined, unparsable: true };
    }
  }
}

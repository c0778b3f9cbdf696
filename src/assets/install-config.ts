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
import { AssetStore } from './store.js';
import { readInputText } from '../input-files.js';
import { sha256 } from './files.js';
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
    const file = path.join(ctx.dir, installConfigFileName);
    const text = await readInputText(file, installConfigFile);
    if (text === undefined) {
      throw new ConfigError(`${file} does not exist`, [], { hint: `run \`provisioner create install-config --dir ${ctx.dir}\` to write one` });
    }
    const { config, warnings } = await loadInstallConfigText(text, { dir: ctx.dir, schema: installConfigSchema, fileName: file });
    for (const warning of warnings) {
      log(ctx.sink, 'warn', `${installConfigFileName}: ${warning.path}: ${warning.message}${warning.hint ? ` (${warning.hint})` : ''}`);
    }
    return { value: { config, warnings, text, sha256: sha256(text) }, files: [] };
  },
};

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
 * through the asset store, the user's edits kept, nothing regenerated or written.
 */
export async function readInstallConfig(options: { dir: string; sink: AssetContext['sink']; signal?: AbortSignal }): Promise<InstallConfig> {
  const store = await AssetStore.open({ ...options, regenerate: [], keepEdits: true });
  return (await store.fetch(installConfigAsset)).config;
}

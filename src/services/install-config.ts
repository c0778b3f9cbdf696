/**
 * `create install-config`: writes `<dir>/install-config.yaml` from answers (flags or
 * the interactive prompt; this service does not care which), validated by the same
 * rules as a hand-written file, plus the JSON Schema copy its modeline names.
 */
import path from 'node:path';
import { AssetStore, newInstallConfigAsset, schemaCopyPath } from '../assets/index.js';
import { installConfigFileName, type NewInstallConfigAnswers } from '../config/index.js';
import { ConfigError } from '../errors.js';
import { readIfExists } from '../files.js';
import { log, type EventSink } from '../events.js';

export interface CreateInstallConfigOptions {
  dir: string;
  answers: NewInstallConfigAnswers;
  /** Replace an existing install-config.yaml. Default: false. */
  force: boolean;
  sink: EventSink;
  signal?: AbortSignal;
}

export interface CreateInstallConfigResult {
  path: string;
  schemaPath: string;
}

export async function createInstallConfig(options: CreateInstallConfigOptions): Promise<CreateInstallConfigResult> {
  const dir = path.resolve(options.dir);
  const target = path.join(dir, installConfigFileName);
  if (!options.force && (await readIfExists(target)) !== undefined) {
    throw new ConfigError(`${target} already exists`, [], {
      hint: `edit it (\`provisioner explain install-config\` documents every field), or pass --force to replace it`,
    });
  }
  // The schema copy is ours alone; the install config is replaced only when asked (--force).
  const store = await AssetStore.open({
    dir,
    sink: options.sink,
    ...(options.signal ? { signal: options.signal } : {}),
    regenerate: options.force ? [installConfigFileName, schemaCopyPath] : [schemaCopyPath],
  });
  await store.fetch(newInstallConfigAsset(options.answers));
  await store.commit();
  const result = { path: target, schemaPath: path.join(dir, schemaCopyPath) };
  log(options.sink, 'info', `Next: review ${installConfigFileName}, then run \`provisioner create manifests --dir ${dir}\``);
  options.sink.emit({ type: 'result', kind: 'install-config', text: `Wrote ${target}`, data: result });
  return result;
}

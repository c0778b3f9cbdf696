/**
 * Writes manifests/install-config.schema.json from the install config schema
 * (src/config/install-config.ts). Run after changing the schema:
 *   npx tsx scripts/schema/install-config.ts
 * A unit test (src/config/json-schema.test.ts) fails when the file is out of date.
 */
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { installConfigJsonSchema } from '../../src/assets/install-config.js';

export const schemaFile = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../manifests/install-config.schema.json');

export function renderSchemaFile(): string {
  return JSON.stringify(installConfigJsonSchema(), null, 2) + '\n';
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  await writeFile(schemaFile, renderSchemaFile());
  process.stdout.write(`wrote ${schemaFile}\n`);
}

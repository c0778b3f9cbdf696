import { readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { renderSchemaFile, schemaFile } from '../../scripts/schema/install-config.js';

describe('manifests/install-config.schema.json', () => {
  it('is in sync with the schema in src/config (regenerate: npx tsx scripts/schema/install-config.ts)', async () => {
    expect(await readFile(schemaFile, 'utf8')).toBe(renderSchemaFile());
  });

  it('is a draft-07 schema that editors can complete from', async () => {
    const schema = JSON.parse(await readFile(schemaFile, 'utf8')) as { $schema: string; required: string[]; properties: Record<string, { description?: string }> };
    expect(schema.$schema).toBe('http://json-schema.org/draft-07/schema#');
    expect(schema.required).toEqual(['apiVersion', 'kind', 'metadata', 'machinePools']);
    for (const [field, property] of Object.entries(schema.properties)) expect(property.description, field).toBeTruthy();
  });
});

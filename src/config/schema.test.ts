import { describe, expect, it } from 'vitest';
import { applyDefaults, closest, computed, defaulted, formatPath, optional, required, s, toJsonSchema, validateNode, type SchemaProblem } from './schema.js';

const pool = s.object(
  {
    name: required(s.string({ doc: 'Name.', pattern: /^[a-z]+$/, patternHint: 'lowercase letters' })),
    size: defaulted(s.integer({ doc: 'Size.', minimum: 1 }), 1),
    mode: optional(s.enum(['fast', 'slow'], { doc: 'Mode.' })),
    labels: defaulted(s.map(s.string({ doc: 'Value.' }), { doc: 'Labels.', keyCheck: (k) => (k.includes(' ') ? 'no spaces' : undefined) }), {}),
    derived: computed(s.string({ doc: 'Derived.' }), 'the name'),
  },
  { doc: 'A pool.', unknownFieldHints: { secret: 'never inline secrets' } },
);
const root = s.object(
  {
    pools: required(s.array(pool, { doc: 'Pools.', minItems: 1, unique: 'name' })),
    choice: defaulted(s.object({ a: optional(s.object({}, { doc: 'A.' })), b: optional(s.object({}, { doc: 'B.' })) }, { doc: 'One of.', exactlyOne: true }), { a: {} }),
  },
  { doc: 'Root.' },
);

function problems(value: unknown): string[] {
  const out: SchemaProblem[] = [];
  validateNode(root, value, [], out);
  return out.map((p) => `${formatPath(p.path)}: ${p.message}${p.hint ? ` | ${p.hint}` : ''}`);
}

describe('schema validation', () => {
  it('accepts a valid document', () => {
    expect(problems({ pools: [{ name: 'a' }] })).toEqual([]);
  });

  it('reports every problem with its path, not only the first', () => {
    expect(problems({ pools: [{ name: 'A', size: 0 }, { size: 'x', mode: 'fsat', labels: { 'a b': 'x' } }], extra: 1 })).toEqual([
      'extra: unknown field | allowed fields: pools, choice',
      'pools[0].name: "A" is not valid | lowercase letters',
      'pools[0].size: must be at least 1, got 0',
      'pools[1].name: is required | Name.',
      'pools[1].size: must be an integer, got the string "x"',
      'pools[1].mode: must be one of fast, slow; got "fsat" | did you mean "fast"?',
      'pools[1].labels["a b"]: no spaces',
    ]);
  });

  it('suggests the field meant, or a specific hint', () => {
    expect(problems({ pools: [{ name: 'a', sise: 2, secret: 'x' }] })).toEqual(['pools[0].sise: unknown field | did you mean "size"?', 'pools[0].secret: unknown field | never inline secrets']);
  });

  it('finds duplicates by key and enforces exactly one', () => {
    expect(problems({ pools: [{ name: 'a' }, { name: 'a' }], choice: { a: {}, b: {} } })).toEqual([
      'pools[1].name: duplicates entry 0 ("a") | each entry must be distinct',
      'choice: sets a and b; exactly one is allowed | choose one of: a, b',
    ]);
  });

  it('treats null as absent', () => {
    expect(problems({ pools: [{ name: 'a', size: null }], choice: null })).toEqual([]);
  });
});

describe('defaults', () => {
  it('fills defaulted fields recursively and leaves computed ones', () => {
    expect(applyDefaults(root, { pools: [{ name: 'a' }] })).toEqual({ pools: [{ name: 'a', size: 1, labels: {} }], choice: { a: {} } });
  });
});

describe('JSON Schema', () => {
  it('describes types, requirements, defaults and unknown fields', () => {
    const schema = toJsonSchema(root) as { properties: { pools: { items: Record<string, unknown> }; choice: Record<string, unknown> }; required: string[] };
    expect(schema.required).toEqual(['pools']);
    expect(schema.properties.choice).toMatchObject({ minProperties: 1, maxProperties: 1, default: { a: {} } });
    expect(schema.properties.pools.items).toMatchObject({
      additionalProperties: false,
      required: ['name'],
      properties: { size: { type: 'integer', minimum: 1, default: 1 }, mode: { enum: ['fast', 'slow'] }, name: { pattern: '^[a-z]+$' } },
    });
    expect((schema.properties.pools.items.properties as Record<string, { description: string }>).derived?.description).toContain('Default: the name');
  });
});

describe('paths and suggestions', () => {
  it('formats paths the way problems print them', () => {
    expect(formatPath(['machinePools', 1, 'labels', 'node-role.kubernetes.io/worker'])).toBe('machinePools[1].labels["node-role.kubernetes.io/worker"]');
    expect(formatPath([])).toBe('');
  });
  it('suggests only close matches', () => {
    expect(closest('controlplane', ['etcd', 'controlPlane', 'worker'])).toBe('controlPlane');
    expect(closest('banana', ['etcd', 'controlPlane', 'worker'])).toBeUndefined();
  });
});

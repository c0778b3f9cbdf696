/**
 * A small self-describing schema language. One declaration of a document's shape
 * gives three outputs that cannot drift apart:
 *   - validation with field paths and hints (`validateNode`, every problem at once),
 *   - JSON Schema (draft-07) for editors (`toJsonSchema`),
 *   - terminal documentation (`explainNode`, in ./explain.ts),
 * and the TypeScript type of the validated, defaulted document (`Infer<typeof node>`).
 *
 * Rules that span several fields (CIDRs that must not overlap, one control-plane pool)
 * are not expressible here; they live in ./rules.ts and are listed in each node's
 * `rules` so that explain and the JSON Schema descriptions still state them.
 */

/** What every node carries: the documentation shown by explain and in JSON Schema. */
export interface NodeDoc {
  /** First sentence is the one-line summary; the rest is shown by explain. */
  doc: string;
  /** Constraints the schema cannot express (checked in rules.ts), stated plainly. */
  rules?: readonly string[];
  examples?: readonly unknown[];
}

export interface StringNode<T extends string = string> extends NodeDoc {
  kind: 'string';
  enum?: readonly T[];
  pattern?: RegExp;
  /** The pattern in words, used as the hint when a value does not match. */
  patternHint?: string;
  minLength?: number;
  maxLength?: number;
  /** Name of the value's format, shown by explain (e.g. `cidr`, `duration`). */
  format?: string;
  /** Extra check of a well-typed value; returns the problem or undefined. */
  check?: (value: string) => string | undefined;
  checkHint?: string;
}

export interface NumberNode extends NodeDoc {
  kind: 'integer' | 'number';
  minimum?: number;
  maximum?: number;
}

export interface BooleanNode extends NodeDoc {
  kind: 'boolean';
}

export interface LiteralNode<T extends string = string> extends NodeDoc {
  kind: 'literal';
  value: T;
}

export interface ArrayNode<I extends SchemaNode = SchemaNode> extends NodeDoc {
  kind: 'array';
  items: I;
  minItems?: number;
  maxItems?: number;
  /** Items must be distinct (scalars), or distinct by this field (objects). */
  unique?: true | string;
}

export interface MapNode<V extends SchemaNode = SchemaNode> extends NodeDoc {
  kind: 'map';
  values: V;
  /** Check of each key; returns the problem or undefined. */
  keyCheck?: (key: string) => string | undefined;
  keyHint?: string;
  /** A regex the keys must match, for the JSON Schema (`propertyNames`). */
  keyPattern?: RegExp;
}

export type Presence = 'required' | 'optional' | 'defaulted' | 'computed';

export interface Field<N extends SchemaNode = SchemaNode, P extends Presence = Presence> {
  node: N;
  presence: P;
  /** For `defaulted`: the value used when the field is absent. */
  default?: unknown;
  /** For `computed`: how the default is derived, in words (defaults.ts derives it). */
  defaultDoc?: string;
}

export type Fields = Record<string, Field>;

export interface ObjectNode<F extends Fields = Fields> extends NodeDoc {
  kind: 'object';
  fields: F;
  /** Exactly one of the fields must be set (a union by key, like `platform`). */
  exactlyOne?: boolean;
  /** Hints for fields people often write but that do not exist, by exact name. */
  unknownFieldHints?: Readonly<Record<string, string>>;
  /** The hint when the value is not a mapping (e.g. a field that was a string before). Default: none. */
  typeHint?: string;
}

export type SchemaNode = StringNode | NumberNode | BooleanNode | LiteralNode | ArrayNode | MapNode | ObjectNode;

// ---------- type inference ----------

type Simplify<T> = { [K in keyof T]: T[K] } & {};

type OptionalKeys<F extends Fields> = { [K in keyof F]: F[K]['presence'] extends 'optional' ? K : never }[keyof F];
type PresentKeys<F extends Fields> = Exclude<keyof F, OptionalKeys<F>>;

/** The TypeScript type of a validated, defaulted value of a node. */
export type Infer<N> = N extends StringNode<infer T>
  ? T
  : N extends NumberNode
    ? number
    : N extends BooleanNode
      ? boolean
      : N extends LiteralNode<infer T>
        ? T
        : N extends ArrayNode<infer I>
          ? Infer<I>[]
          : N extends MapNode<infer V>
            ? Record<string, Infer<V>>
            : N extends ObjectNode<infer F>
              ? Simplify<{ [K in PresentKeys<F>]: Infer<F[K]['node']> } & { [K in OptionalKeys<F>]?: Infer<F[K]['node']> }>
              : never;

// ---------- builders ----------

type Opts<N> = Omit<N, 'kind'>;

export const s = {
  string: (opts: Opts<StringNode>): StringNode => ({ kind: 'string', ...opts }),
  enum: <const T extends string>(values: readonly T[], opts: Omit<Opts<StringNode<T>>, 'enum'>): StringNode<T> => ({
    kind: 'string',
    enum: values,
    ...opts,
  }),
  literal: <const T extends string>(value: T, opts: NodeDoc): LiteralNode<T> => ({ kind: 'literal', value, ...opts }),
  integer: (opts: Opts<NumberNode>): NumberNode => ({ kind: 'integer', ...opts }),
  number: (opts: Opts<NumberNode>): NumberNode => ({ kind: 'number', ...opts }),
  boolean: (opts: NodeDoc): BooleanNode => ({ kind: 'boolean', ...opts }),
  array: <I extends SchemaNode>(items: I, opts: Omit<Opts<ArrayNode<I>>, 'items'>): ArrayNode<I> => ({ kind: 'array', items, ...opts }),
  map: <V extends SchemaNode>(values: V, opts: Omit<Opts<MapNode<V>>, 'values'>): MapNode<V> => ({ kind: 'map', values, ...opts }),
  object: <F extends Fields>(fields: F, opts: Omit<Opts<ObjectNode<F>>, 'fields'>): ObjectNode<F> => ({ kind: 'object', fields, ...opts }),
};

/** What a default may be: shallow types only (objects default to `{}` and fill their own fields). */
export type DefaultValue<N> = N extends StringNode<infer T>
  ? T
  : N extends NumberNode
    ? number
    : N extends BooleanNode
      ? boolean
      : N extends ArrayNode<infer I>
        ? (I extends StringNode<infer T> ? T : unknown)[]
        : Record<string, unknown>;

/** The field must be present. */
export const required = <N extends SchemaNode>(node: N): Field<N, 'required'> => ({ node, presence: 'required' });
/** The field may be absent; no default. */
export const optional = <N extends SchemaNode>(node: N): Field<N, 'optional'> => ({ node, presence: 'optional' });
/** The field may be absent; `value` is used then (objects: `{}` fills their own defaults). */
export const defaulted = <N extends SchemaNode>(
  node: N,
  value: DefaultValue<N>,
): Field<N, 'defaulted'> => ({ node, presence: 'defaulted', default: value });
/** The field may be absent; its default is derived from other fields by defaults.ts. */
export const computed = <N extends SchemaNode>(node: N, defaultDoc: string): Field<N, 'computed'> => ({
  node,
  presence: 'computed',
  defaultDoc,
});

// ---------- paths ----------

export type PathSegment = string | number;

const plainKey = /^[A-Za-z_][A-Za-z0-9_-]*$/;

/** `machinePools[1].labels["node-role.kubernetes.io/worker"]`: the form every problem uses. */
export function formatPath(path: readonly PathSegment[]): string {
  let out = '';
  for (const segment of path) {
    if (typeof segment === 'number') out += `[${segment}]`;
    else if (plainKey.test(segment)) out += out === '' ? segment : `.${segment}`;
    else out += `[${JSON.stringify(segment)}]`;
  }
  return out;
}

// ---------- validation ----------

export interface SchemaProblem {
  path: PathSegment[];
  message: string;
  hint?: string;
}

function typeName(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'a list';
  if (typeof value === 'object') return 'a mapping';
  if (typeof value === 'string') return `the string ${JSON.stringify(value)}`;
  return `${typeof value} ${String(value)}`;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Checks `value` against `node`; appends every problem found to `problems`. Null counts as absent. */
export function validateNode(node: SchemaNode, value: unknown, path: PathSegment[], problems: SchemaProblem[]): void {
  switch (node.kind) {
    case 'string': {
      if (typeof value !== 'string') {
        problems.push({ path, message: `must be a string, got ${typeName(value)}`, hint: node.enum ? `one of: ${node.enum.join(', ')}` : undefined });
        return;
      }
      if (node.enum && !node.enum.includes(value)) {
        const close = closest(value, node.enum);
        problems.push({
          path,
          message: `must be one of ${node.enum.join(', ')}; got ${JSON.stringify(value)}`,
          hint: close ? `did you mean ${JSON.stringify(close)}?` : undefined,
        });
        return;
      }
      if (node.minLength !== undefined && value.length < node.minLength) {
        problems.push({ path, message: node.minLength === 1 ? 'must not be empty' : `must be at least ${node.minLength} characters long` });
        return;
      }
      if (node.maxLength !== undefined && value.length > node.maxLength) {
        problems.push({ path, message: `must be at most ${node.maxLength} characters long (is ${value.length})` });
        return;
      }
      if (node.pattern && !node.pattern.test(value)) {
        problems.push({ path, message: `${JSON.stringify(value)} is not valid`, hint: node.patternHint });
        return;
      }
      const checked = node.check?.(value);
      if (checked) problems.push({ path, message: checked, hint: node.checkHint });
      return;
    }
    case 'integer':
    case 'number': {
      if (typeof value !== 'number' || Number.isNaN(value)) {
        problems.push({ path, message: `must be ${node.kind === 'integer' ? 'an integer' : 'a number'}, got ${typeName(value)}` });
        return;
      }
      if (node.kind === 'integer' && !Number.isInteger(value)) {
        problems.push({ path, message: `must be a whole number, got ${value}` });
        return;
      }
      if (node.minimum !== undefined && value < node.minimum) problems.push({ path, message: `must be at least ${node.minimum}, got ${value}` });
      if (node.maximum !== undefined && value > node.maximum) problems.push({ path, message: `must be at most ${node.maximum}, got ${value}` });
      return;
    }
    case 'boolean':
      if (typeof value !== 'boolean') problems.push({ path, message: `must be true or false, got ${typeName(value)}` });
      return;
    case 'literal':
      if (value !== node.value) problems.push({ path, message: `must be ${JSON.stringify(node.value)}, got ${typeName(value)}` });
      return;
    case 'array': {
      if (!Array.isArray(value)) {
        problems.push({ path, message: `must be a list, got ${typeName(value)}` });
        return;
      }
      if (node.minItems !== undefined && value.length < node.minItems) {
        problems.push({ path, message: node.minItems === 1 ? 'must have at least one entry' : `must have at least ${node.minItems} entries` });
      }
      if (node.maxItems !== undefined && value.length > node.maxItems) {
        problems.push({ path, message: `must have at most ${node.maxItems} entries (has ${value.length})` });
      }
      value.forEach((item, i) => {
        if (item === null || item === undefined) problems.push({ path: [...path, i], message: 'must not be empty' });
        else validateNode(node.items, item, [...path, i], problems);
      });
      if (node.unique) {
        const seen = new Map<string, number>();
        value.forEach((item, i) => {
          const key = node.unique === true ? item : isRecord(item) ? item[node.unique as string] : undefined;
          if (typeof key !== 'string' && typeof key !== 'number') return;
          const first = seen.get(String(key));
          if (first === undefined) seen.set(String(key), i);
          else {
            const at = node.unique === true ? [...path, i] : [...path, i, node.unique as string];
            problems.push({ path: at, message: `duplicates entry ${first} (${JSON.stringify(key)})`, hint: 'each entry must be distinct' });
          }
        });
      }
      return;
    }
    case 'map': {
      if (!isRecord(value)) {
        problems.push({ path, message: `must be a mapping of keys to values, got ${typeName(value)}` });
        return;
      }
      for (const [key, item] of Object.entries(value)) {
        const keyProblem = node.keyCheck?.(key);
        if (keyProblem) problems.push({ path: [...path, key], message: keyProblem, hint: node.keyHint });
        if (item === null || item === undefined) {
          // An empty value is an empty string for labels-like maps; anything else is a problem of the value node.
          if (node.values.kind !== 'string') problems.push({ path: [...path, key], message: 'must not be empty' });
          continue;
        }
        validateNode(node.values, item, [...path, key], problems);
      }
      return;
    }
    case 'object': {
      if (!isRecord(value)) {
        problems.push({ path, message: `must be a mapping, got ${typeName(value)}`, ...(node.typeHint ? { hint: node.typeHint } : {}) });
        return;
      }
      const known = Object.keys(node.fields);
      for (const key of Object.keys(value)) {
        if (key in node.fields) continue;
        const hint = node.unknownFieldHints?.[key] ?? unknownFieldHint(key, known);
        problems.push({ path: [...path, key], message: 'unknown field', hint });
      }
      const present = known.filter((k) => value[k] !== undefined && value[k] !== null);
      if (node.exactlyOne && present.length !== 1) {
        problems.push({
          path,
          message: present.length === 0 ? `must set exactly one of: ${known.join(', ')}` : `sets ${present.join(' and ')}; exactly one is allowed`,
          hint: `choose one of: ${known.join(', ')}`,
        });
      }
      for (const [key, field] of Object.entries(node.fields)) {
        const child = value[key];
        if (child === undefined || child === null) {
          if (field.presence === 'required') problems.push({ path: [...path, key], message: 'is required', hint: firstSentence(field.node.doc) });
          continue;
        }
        validateNode(field.node, child, [...path, key], problems);
      }
      return;
    }
  }
}

function unknownFieldHint(key: string, known: readonly string[]): string {
  const close = closest(key, known);
  return close ? `did you mean "${close}"?` : `allowed fields: ${known.join(', ')}`;
}

/** The candidate nearest to `word` (case-insensitive edit distance ≤ 2, or same letters ignoring case). */
export function closest(word: string, candidates: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestDistance = Infinity;
  for (const candidate of candidates) {
    const d = editDistance(word.toLowerCase(), candidate.toLowerCase());
    if (d < bestDistance) {
      best = candidate;
      bestDistance = d;
    }
  }
  const limit = Math.min(2, Math.floor(word.length / 3));
  return best !== undefined && bestDistance <= Math.max(limit, 1) ? best : undefined;
}

/** Edit distance counting a swap of two adjacent letters as one edit (the commonest typo). */
function editDistance(a: string, b: string): number {
  const d: number[][] = Array.from({ length: a.length + 1 }, (_, i) => Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)));
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let best = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) best = Math.min(best, d[i - 2]![j - 2]! + 1);
      d[i]![j] = best;
    }
  }
  return d[a.length]![b.length]!;
}

export function firstSentence(doc: string): string {
  const match = /^(.+?[.!?])(\s|$)/s.exec(doc.trim());
  return (match?.[1] ?? doc.trim()).replace(/\s+/g, ' ');
}

// ---------- defaults ----------

/**
 * Returns a copy of `value` with every `defaulted` field filled in, recursively.
 * Call only on values that passed validation. `computed` fields are left to defaults.ts.
 */
export function applyDefaults(node: SchemaNode, value: unknown): unknown {
  switch (node.kind) {
    case 'array':
      return Array.isArray(value) ? value.map((item) => applyDefaults(node.items, item)) : value;
    case 'map':
      if (!isRecord(value)) return value;
      return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, v === null && node.values.kind === 'string' ? '' : applyDefaults(node.values, v)]));
    case 'object': {
      if (!isRecord(value)) return value;
      const out: Record<string, unknown> = {};
      for (const [key, field] of Object.entries(node.fields)) {
        let child = value[key];
        if ((child === undefined || child === null) && field.presence === 'defaulted') child = structuredClone(field.default);
        if (child === undefined || child === null) continue;
        out[key] = applyDefaults(field.node, child);
      }
      return out;
    }
    default:
      return value;
  }
}

// ---------- JSON Schema ----------

export type JsonSchema = Record<string, unknown>;

function describe(node: NodeDoc, extra: readonly string[] = []): string {
  const parts = [node.doc.trim(), ...(node.rules ?? []).map((r) => `Rule: ${r}`), ...extra];
  return parts.join('\n\n');
}

/** JSON Schema (draft-07) of a node, for yaml-language-server and other editors. */
export function toJsonSchema(node: SchemaNode, fieldInfo: Pick<Field, 'presence' | 'default' | 'defaultDoc'> | undefined = undefined): JsonSchema {
  const extra: string[] = [];
  if (fieldInfo?.presence === 'computed' && fieldInfo.defaultDoc) extra.push(`Default: ${fieldInfo.defaultDoc}`);
  const base: JsonSchema = { description: describe(node, extra) };
  if (fieldInfo?.presence === 'defaulted') base.default = fieldInfo.default;
  if (node.examples?.length) base.examples = node.examples;
  switch (node.kind) {
    case 'string':
      return {
        type: 'string',
        ...base,
        ...(node.enum ? { enum: [...node.enum] } : {}),
        ...(node.pattern ? { pattern: node.pattern.source } : {}),
        ...(node.minLength !== undefined ? { minLength: node.minLength } : {}),
        ...(node.maxLength !== undefined ? { maxLength: node.maxLength } : {}),
      };
    case 'integer':
    case 'number':
      return {
        type: node.kind,
        ...base,
        ...(node.minimum !== undefined ? { minimum: node.minimum } : {}),
        ...(node.maximum !== undefined ? { maximum: node.maximum } : {}),
      };
    case 'boolean':
      return { type: 'boolean', ...base };
    case 'literal':
      return { type: 'string', ...base, const: node.value, enum: [node.value] };
    case 'array':
      return {
        type: 'array',
        ...base,
        items: toJsonSchema(node.items),
        ...(node.minItems !== undefined ? { minItems: node.minItems } : {}),
        ...(node.maxItems !== undefined ? { maxItems: node.maxItems } : {}),
        ...(node.unique === true ? { uniqueItems: true } : {}),
      };
    case 'map':
      return {
        type: 'object',
        ...base,
        additionalProperties: toJsonSchema(node.values),
        ...(node.keyPattern ? { propertyNames: { pattern: node.keyPattern.source } } : {}),
      };
    case 'object': {
      const properties: Record<string, JsonSchema> = {};
      const requiredKeys: string[] = [];
      for (const [key, field] of Object.entries(node.fields)) {
        properties[key] = toJsonSchema(field.node, field);
        if (field.presence === 'required') requiredKeys.push(key);
      }
      return {
        type: 'object',
        ...base,
        properties,
        ...(requiredKeys.length ? { required: requiredKeys } : {}),
        additionalProperties: false,
        ...(node.exactlyOne ? { minProperties: 1, maxProperties: 1 } : {}),
      };
    }
  }
}

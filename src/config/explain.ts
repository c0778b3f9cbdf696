/**
 * Terminal documentation of a schema, in the spirit of `kubectl explain`: the field's
 * type, its description and rules, its default, and its sub-fields.
 */
import { closest, firstSentence, type Field, type SchemaNode } from './schema.js';

export interface ExplainTarget {
  /** Dotted path as the user wrote it, normalized (e.g. `machinePools.roles`). */
  path: string;
  node: SchemaNode;
  field?: Field;
}

export type ExplainLookup = { ok: true; target: ExplainTarget } | { ok: false; at: string; unknown: string; candidates: string[]; suggestion?: string };

/** Splits `a.b[].c` / `a.b[0].c` / `a.b.c` into field names; array steps are implicit. */
export function splitExplainPath(text: string): string[] {
  return text
    .replace(/\[[^\]]*\]/g, '')
    .split('.')
    .map((s) => s.trim())
    .filter((s) => s.length > 0);
}

/** Walks field names from `root`, stepping through lists and maps transparently. */
export function lookupField(root: SchemaNode, segments: readonly string[]): ExplainLookup {
  let node = root;
  let field: Field | undefined;
  const walked: string[] = [];
  for (const segment of segments) {
    node = unwrap(node);
    if (node.kind !== 'object') {
      return { ok: false, at: walked.join('.'), unknown: segment, candidates: [] };
    }
    const next = node.fields[segment];
    if (!next) {
      const candidates = Object.keys(node.fields);
      const suggestion = closest(segment, candidates);
      return { ok: false, at: walked.join('.'), unknown: segment, candidates, ...(suggestion ? { suggestion } : {}) };
    }
    field = next;
    node = next.node;
    walked.push(segment);
  }
  return { ok: true, target: { path: walked.join('.'), node, ...(field ? { field } : {}) } };
}

/** Lists and maps are transparent in paths: `machinePools.name` means each pool's name. */
function unwrap(node: SchemaNode): SchemaNode {
  let current = node;
  while (current.kind === 'array' || current.kind === 'map') current = current.kind === 'array' ? current.items : current.values;
  return current;
}

function typeLabel(node: SchemaNode): string {
  switch (node.kind) {
    case 'string':
      return node.enum ? `enum(${node.enum.join('|')})` : node.format ? `string(${node.format})` : 'string';
    case 'literal':
      return `"${node.value}"`;
    case 'array':
      return `[]${typeLabel(node.items)}`;
    case 'map':
      return `map[string]${typeLabel(node.values)}`;
    case 'object':
      return 'object';
    default:
      return node.kind;
  }
}

function presenceLabel(field: Field | undefined): string {
  if (!field) return '';
  switch (field.presence) {
    case 'required':
      return ' -required-';
    case 'defaulted':
      return ` (default: ${JSON.stringify(field.default)})`;
    case 'computed':
      return ` (default: ${field.defaultDoc})`;
    default:
      return '';
  }
}

function wrap(text: string, width: number, indent: string): string[] {
  const lines: string[] = [];
  for (const paragraph of text.split(/\n\s*\n/)) {
    let line = '';
    for (const word of paragraph.split(/\s+/).filter(Boolean)) {
      if (line && line.length + 1 + word.length > width) {
        lines.push(indent + line);
        line = word;
      } else line = line ? `${line} ${word}` : word;
    }
    if (line) lines.push(indent + line);
    lines.push('');
  }
  while (lines.at(-1) === '') lines.pop();
  return lines;
}

export interface ExplainOptions {
  /** Name of the document, printed as the path's root, e.g. `install-config`. */
  rootName: string;
  /** Print every nested field, not only the direct ones. Default: false. */
  recursive?: boolean;
  /** Text width. Default: 80. */
  width?: number;
}

/** The explain text of a resolved target. */
export function renderExplain(target: ExplainTarget, options: ExplainOptions): string {
  const width = options.width ?? 80;
  const { node, field } = target;
  const fullPath = target.path ? `${options.rootName}.${target.path}` : options.rootName;
  const lines: string[] = [];
  lines.push(`FIELD:    ${fullPath} <${typeLabel(node)}>${presenceLabel(field)}`);
  lines.push('');
  lines.push('DESCRIPTION:');
  lines.push(...wrap(node.doc, width - 4, '    '));
  const inner = unwrap(node);
  const docNodes = inner === node ? [node] : [node, inner];
  const rules = docNodes.flatMap((n) => n.rules ?? []);
  if (rules.length) {
    lines.push('', 'RULES:');
    for (const rule of rules) lines.push(...wrap(`- ${rule}`, width - 4, '    '));
  }
  if (inner.kind === 'string' && inner.enum) lines.push('', `ALLOWED VALUES: ${inner.enum.join(', ')}`);
  if (inner.kind === 'string' && inner.patternHint) lines.push('', `FORMAT: ${inner.patternHint}`);
  if ((inner.kind === 'integer' || inner.kind === 'number') && (inner.minimum !== undefined || inner.maximum !== undefined)) {
    lines.push('', `RANGE: ${inner.minimum ?? '-∞'} to ${inner.maximum ?? '∞'}`);
  }
  const examples = docNodes.flatMap((n) => n.examples ?? []);
  if (examples.length) lines.push('', `EXAMPLE: ${examples.map((e) => JSON.stringify(e)).join(', ')}`);
  if (inner.kind === 'object' && Object.keys(inner.fields).length > 0) {
    lines.push('', inner.exactlyOne ? 'FIELDS (set exactly one):' : 'FIELDS:');
    lines.push(...renderFields(inner, options.recursive ?? false, '    ', width));
  }
  return lines.join('\n') + '\n';
}

function renderFields(node: SchemaNode & { kind: 'object' }, recursive: boolean, indent: string, width: number): string[] {
  const lines: string[] = [];
  for (const [name, field] of Object.entries(node.fields)) {
    lines.push(`${indent}${name} <${typeLabel(field.node)}>${presenceLabel(field)}`);
    lines.push(...wrap(firstSentence(field.node.doc), width - indent.length - 4, `${indent}    `));
    const inner = unwrap(field.node);
    if (recursive && inner.kind === 'object' && Object.keys(inner.fields).length > 0) {
      lines.push(...renderFields(inner, true, `${indent}    `, width));
    }
  }
  return lines;
}

/**
 * Loading the install config: parse YAML (keeping line numbers, within the size and alias
 * limits of `installConfigFile`), check the schema, fill defaults, run the cross-field
 * rules (built-in and the platform's), check the files it references. Every problem is
 * collected; any error throws one ConfigError listing them all, each with its field path,
 * line and hint.
 */
import { constants as fsConstants } from 'node:fs';
import { access, stat } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { isNode, type Document, type LineCounter } from 'yaml';
import { ConfigError, type FieldProblem } from '../errors.js';
import { parseYamlDocument } from '../input-files.js';
import { withDefaults } from './defaults.js';
import { hookStages, installConfigFile, installConfigFileName, type InstallConfig } from './install-config.js';
import type { InstallConfigSchema, PlatformConfigSection } from './platform-section.js';
import { installConfigRules, namespaceNotReserved, reservedNamespaces, runRules, type RuleProblem } from './rules.js';
import { formatPath, validateNode, type Field, type PathSegment, type SchemaNode, type SchemaProblem } from './schema.js';

export interface ValidateOptions {
  /** The schema with the platforms' sections (the platform registry's `installConfigSchema`); their rules run with the built-in ones. */
  schema: InstallConfigSchema;
  /** Name used in messages. Default: `install-config.yaml`. */
  fileName?: string;
}

export interface LoadOptions extends ValidateOptions {
  /** Install directory; relative paths in the config resolve against it. */
  dir: string;
  /** Check that the files the config references (hooks, credentials) exist. Default: true. */
  checkFiles?: boolean;
}

export interface ValidatedInstallConfig {
  config: InstallConfig;
  /** Problems that do not stop generation (a control plane without HA...), with paths. */
  warnings: FieldProblem[];
}

const errorHint = 'Fix every field listed, then rerun; `provisioner explain install-config.<field>` documents each one.';

/** Resolves a path written in the config: `~` is the home directory; relative paths are relative to `dir`. */
export function resolveConfigPath(dir: string, written: string): string {
  if (written === '~') return os.homedir();
  if (written.startsWith('~/')) return path.join(os.homedir(), written.slice(2));
  return path.resolve(dir, written);
}

/** Parses and validates install-config text without touching the filesystem. */
export function validateInstallConfigText(text: string, options: ValidateOptions): ValidatedInstallConfig {
  const fileName = options.fileName ?? installConfigFileName;
  const { document, locate } = parse(text, fileName);
  return settle(validateDocument(document, options, locate, fileName), fileName);
}

/** Validates an already-parsed document (for callers holding objects, e.g. property tests). */
export function validateInstallConfigDocument(document: unknown, options: ValidateOptions): ValidatedInstallConfig {
  const fileName = options.fileName ?? installConfigFileName;
  return settle(validateDocument(document, options, () => undefined, fileName), fileName);
}

/** Validates `text` as the install config of `dir`, including the files it references. */
export async function loadInstallConfigText(text: string, options: LoadOptions): Promise<ValidatedInstallConfig> {
  const fileName = options.fileName ?? installConfigFileName;
  const { document, locate } = parse(text, fileName);
  const outcome = validateDocument(document, options, locate, fileName);
  if (options.checkFiles !== false && outcome.config) {
    const files = await checkReferencedFiles(outcome.config, options, { locate, root: options.schema.root });
    outcome.errors.push(...files.errors);
    outcome.warnings.push(...files.warnings);
  }
  return settle(outcome, fileName);
}

interface Outcome {
  /** Set unless the document is not an install config at all. */
  config?: InstallConfig;
  errors: FieldProblem[];
  warnings: FieldProblem[];
}

function settle(outcome: Outcome, fileName: string): ValidatedInstallConfig {
  if (outcome.errors.length > 0 || !outcome.config) {
    throw new ConfigError(`${fileName} is invalid: ${countText(outcome.errors.length)}`, outcome.errors, { hint: errorHint });
  }
  return { config: outcome.config, warnings: outcome.warnings };
}

function countText(n: number): string {
  return n === 1 ? '1 problem' : `${n} problems`;
}

type Locate = (path: readonly PathSegment[]) => number | undefined;

function parse(text: string, fileName: string): { document: unknown; locate: Locate } {
  const { document, value, lineCounter } = parseYamlDocument(text, fileName, installConfigFile);
  return { document: value, locate: locator(document, lineCounter) };
}

function locator(doc: Document, lineCounter: LineCounter): Locate {
  return (fieldPath) => {
    // The deepest node that exists along the path: a missing field points at its parent.
    for (let depth = fieldPath.length; depth >= 0; depth--) {
      const node = depth === 0 ? doc.contents : doc.getIn(fieldPath.slice(0, depth), true);
      if (isNode(node) && node.range) return lineCounter.linePos(node.range[0]).line;
    }
    return undefined;
  };
}

/** How problems are placed: the line of a path in the file, and the schema whose fields the hints name. */
interface Placement {
  locate: Locate;
  root: SchemaNode;
}

function toFieldProblem(problem: SchemaProblem | RuleProblem, placement: Placement): FieldProblem {
  const line = placement.locate(problem.path);
  const where = formatPath(problem.path) || '(document)';
  return {
    path: where,
    message: line !== undefined ? `${problem.message} (line ${line})` : problem.message,
    hint: problem.hint ?? explainHint(placement.root, problem.path),
  };
}

/** Every problem has a next step: when no rule gave a specific one, the field's documentation. */
function explainHint(root: SchemaNode, fieldPath: readonly PathSegment[]): string {
  // Indices and map keys are not fields: `machinePools[1].labels["x"]` is documented at machinePools.labels.
  const fields: string[] = [];
  let node: SchemaNode = root;
  for (const segment of fieldPath) {
    while (node.kind === 'array' || node.kind === 'map') node = node.kind === 'array' ? node.items : node.values;
    if (typeof segment !== 'string' || node.kind !== 'object') continue;
    const field: Field | undefined = node.fields[segment];
    if (!field) break;
    fields.push(segment);
    node = field.node;
  }
  return `see \`provisioner explain ${['install-config', ...fields].join('.')}\``;
}

function validateDocument(document: unknown, options: ValidateOptions, locate: Locate, fileName: string): Outcome {
  if (document === null || document === undefined) {
    return { errors: [{ path: '(document)', message: `${fileName} has no content`, hint: 'run `provisioner create install-config` to write one' }], warnings: [] };
  }
  const { schema } = options;
  const placement: Placement = { locate, root: schema.root };
  const schemaProblems: SchemaProblem[] = [];
  validateNode(schema.root, document, [], schemaProblems);
  const broken = new Set(schemaProblems.map((p) => String(p.path[0] ?? '(document)')));
  if (broken.has('(document)') || broken.has('apiVersion') || broken.has('kind')) {
    // Not an install config at all: rules would only add noise.
    return { errors: schemaProblems.map((p) => toFieldProblem(p, placement)), warnings: [] };
  }
  const config = withDefaults(document, schema);
  const platformNamespaces = [...schema.platforms.values()].flatMap((p) => p.providerNamespaces);
  // The platform's rules only when `platform` names exactly one (otherwise the schema reported it).
  const platform = broken.has('platform') ? undefined : namedPlatform(schema, config);
  const rules = runRules([namespaceNotReserved([...reservedNamespaces, ...platformNamespaces]), ...installConfigRules, ...(platform?.rules ?? [])], config, schemaProblems.map((p) => p.path));
  return {
    config,
    errors: [...schemaProblems, ...rules.errors].map((p) => toFieldProblem(p, placement)),
    warnings: rules.warnings.map((p) => toFieldProblem(p, placement)),
  };
}

/** The platform section of the config's one `platform` key; undefined when it sets none or several. */
function namedPlatform(schema: InstallConfigSchema, config: InstallConfig): PlatformConfigSection | undefined {
  const set = Object.keys(config.platform ?? {}).filter((key) => config.platform[key] !== undefined && config.platform[key] !== null);
  return set.length === 1 ? schema.platforms.get(set[0]!) : undefined;
}

/** Hooks must be executable files; the platform checks the files its section references (credentials). */
async function checkReferencedFiles(config: InstallConfig, options: LoadOptions, placement: Placement): Promise<{ errors: FieldProblem[]; warnings: FieldProblem[] }> {
  const { dir, schema } = options;
  const errors: SchemaProblem[] = [];
  const warnings: SchemaProblem[] = [];
  for (const stage of hookStages) {
    const hooks = config.hooks?.[stage];
    if (!Array.isArray(hooks)) continue;
    for (const [index, hook] of hooks.entries()) {
      if (typeof hook?.path !== 'string') continue;
      const at: PathSegment[] = ['hooks', stage, index, 'path'];
      const resolved = resolveConfigPath(dir, hook.path);
      const info = await stat(resolved).catch(() => undefined);
      if (!info) errors.push({ path: at, message: `${resolved} does not exist`, hint: 'point path at an executable file; relative paths start at the install directory' });
      else if (!info.isFile()) errors.push({ path: at, message: `${resolved} is not a file` });
      else if (!(await access(resolved, fsConstants.X_OK).then(() => true, () => false))) {
        errors.push({ path: at, message: `${resolved} is not executable`, hint: `run chmod +x ${resolved}` });
      }
    }
  }
  const platform = namedPlatform(schema, config);
  const platformFiles = (await platform?.checkFiles?.(config, dir)) ?? { errors: [], warnings: [] };
  errors.push(...platformFiles.errors);
  warnings.push(...platformFiles.warnings);
  return { errors: errors.map((p) => toFieldProblem(p, placement)), warnings: warnings.map((p) => toFieldProblem(p, placement)) };
}

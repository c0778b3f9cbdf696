/**
 * Reading the files provisioner parses — the user's (install config, manifests,
 * kubeconfigs given by flag) and its own (journals, state) — with limits and typed errors.
 *
 * Every reader goes through here so that bad input is always a typed error naming the
 * file, the line and the reason, never a stack trace: a file over its kind's size cap,
 * YAML that resolves too many aliases (nested aliases expand exponentially: an "alias
 * bomb"), or a syntax error. The user's files fail with a ConfigError (exit 3); files
 * provisioner wrote fail with an EnvironmentError (exit 4) whose hint says how to recover.
 */
import { open } from 'node:fs/promises';
import { LineCounter, parseAllDocuments, parseDocument, type Document, type YAMLError } from 'yaml';
import { ConfigError, EnvironmentError, ProvisionerError, type FieldProblem } from './errors.js';

/** What a file is, for its limits and messages. Each reader declares its kind beside the file's name. */
export interface FileKind {
  /** The file in messages, e.g. `install config`, `journal`. */
  name: string;
  /** Largest file accepted, in bytes. */
  maxBytes: number;
  /** Who writes it: `user` files fail with a ConfigError, `provisioner` files with an EnvironmentError. */
  writer: 'user' | 'provisioner';
  /** The next step when `file` cannot be used: how to fix it, or how to recover without it. */
  hint(file: string): string;
  /** YAML only: the most alias resolutions accepted (yaml's `maxAliasCount`). Default 100 (`defaultMaxAliasCount`). */
  maxAliasCount?: number;
}

/** Bytes read at a time. */
const readChunkBytes = 256 * 1024;

/** yaml's own default: enough for any hand-written reuse, far below what a nested-alias bomb needs. */
const defaultMaxAliasCount = 100;

/** One parsed YAML document, with what is needed to point at its nodes' lines. */
export interface ParsedYaml {
  document: Document.Parsed;
  value: unknown;
  lineCounter: LineCounter;
}

/** The file's text, or undefined when it does not exist. Throws the kind's error when it is over the cap or unreadable. */
export async function readInputText(file: string, kind: FileKind): Promise<string | undefined> {
  let handle;
  try {
    handle = await open(file, 'r');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw failure(kind, file, `${file} cannot be read: ${(error as Error).message}`, []);
  }
  try {
    const { size } = await handle.stat();
    if (size > kind.maxBytes) throw tooLarge(kind, file, formatSize(size));
    // Read to the end rather than to the size of the stat: the file may have grown since.
    const chunks: Buffer[] = [];
    let length = 0;
    for (;;) {
      const chunk = Buffer.alloc(readChunkBytes);
      const { bytesRead } = await handle.read(chunk, 0, chunk.length, null);
      if (bytesRead === 0) break;
      chunks.push(chunk.subarray(0, bytesRead));
      length += bytesRead;
      if (length > kind.maxBytes) throw tooLarge(kind, file, `more than ${formatSize(kind.maxBytes)}`);
    }
    return Buffer.concat(chunks, length).toString('utf8');
  } catch (error) {
    if (error instanceof ProvisionerError) throw error;
    throw failure(kind, file, `${file} cannot be read: ${(error as Error).message}`, []);
  } finally {
    await handle.close();
  }
}

/** Parses a single YAML document (duplicate keys refused), resolving aliases within the kind's limit. */
export function parseYamlDocument(text: string, file: string, kind: FileKind): ParsedYaml {
  checkLength(text, file, kind);
  const lineCounter = new LineCounter();
  const document = parseDocument(text, { lineCounter, prettyErrors: true, uniqueKeys: true });
  if (document.errors.length > 0) throw notYaml(kind, file, document.errors);
  return { document, value: toJs(document, file, kind), lineCounter };
}

/** Parses every document of a YAML stream (`---` separated); empty documents give `null`. */
export function parseYamlStream(text: string, file: string, kind: FileKind): unknown[] {
  checkLength(text, file, kind);
  const lineCounter = new LineCounter();
  const documents = parseAllDocuments(text, { lineCounter, prettyErrors: true, uniqueKeys: true });
  const list = Array.isArray(documents) ? documents : [];
  const errors = list.flatMap((d) => d.errors);
  if (errors.length > 0) throw notYaml(kind, file, errors);
  return list.map((document) => toJs(document, file, kind));
}

/** Parses JSON; a syntax error names its line and column. */
export function parseJson(text: string, file: string, kind: FileKind): unknown {
  checkLength(text, file, kind);
  try {
    return JSON.parse(text) as unknown;
  } catch (error) {
    const { line, column } = lineAndColumn(text, jsonErrorOffset(text));
    // V8 quotes the text around the error ("…" is not valid JSON); the line and column say where, without echoing content.
    const reason = (error as Error).message.replace(/,? *".*" is not valid JSON$/s, '').replace(/ in JSON at position \d+.*$/s, '');
    throw failure(kind, file, `${file} is not valid JSON`, [{ path: file, message: `line ${line}, column ${column}: ${reason}` }]);
  }
}

/** Reads and parses a YAML file of one document; undefined when it does not exist. */
export async function readYamlFile(file: string, kind: FileKind): Promise<unknown> {
  const text = await readInputText(file, kind);
  return text === undefined ? undefined : parseYamlDocument(text, file, kind).value;
}

/** Reads and parses a JSON file; undefined when it does not exist. */
export async function readJsonFile(file: string, kind: FileKind): Promise<unknown> {
  const text = await readInputText(file, kind);
  return text === undefined ? undefined : parseJson(text, file, kind);
}

/** The error for a file that was read but does not have the shape its kind needs (a missing field, a wrong type). */
export function invalidInput(file: string, kind: FileKind, problems: readonly FieldProblem[]): ProvisionerError {
  return failure(kind, file, `${file} is not a valid ${kind.name}`, problems);
}

// ---------------------------------------------------------------------------------------

function failure(kind: FileKind, file: string, message: string, problems: readonly FieldProblem[]): ProvisionerError {
  const hint = kind.hint(file);
  if (kind.writer === 'user') return new ConfigError(message, problems, { hint });
  return new EnvironmentError(message, { hint, details: problems.map((p) => `${p.path}: ${p.message}`) });
}

function formatSize(bytes: number): string {
  if (bytes >= 2 ** 20) return `${Number((bytes / 2 ** 20).toFixed(2))} MiB`;
  if (bytes >= 2 ** 10) return `${Number((bytes / 2 ** 10).toFixed(2))} KiB`;
  return `${bytes} bytes`;
}

function tooLarge(kind: FileKind, file: string, size: string): ProvisionerError {
  return failure(kind, file, `${file} is ${size}, over the ${kind.name} size limit of ${formatSize(kind.maxBytes)}`, []);
}

/** Text handed in without a read (tests, generated text) is held to the same cap. */
function checkLength(text: string, file: string, kind: FileKind): void {
  const bytes = Buffer.byteLength(text);
  if (bytes > kind.maxBytes) throw tooLarge(kind, file, formatSize(bytes));
}

function notYaml(kind: FileKind, file: string, errors: readonly YAMLError[]): ProvisionerError {
  const problems = errors.map((error) => {
    const at = error.linePos?.[0];
    // prettyErrors appends "at line L, column C:" and the offending lines; the position leads instead.
    const reason = (error.message.split('\n')[0] ?? '').replace(/ at line \d+, column \d+:?$/, '');
    return { path: file, message: `${at ? `line ${at.line}, column ${at.col}: ` : ''}${reason}` };
  });
  return failure(kind, file, `${file} is not valid YAML`, problems);
}

function toJs(document: Document.Parsed, file: string, kind: FileKind): unknown {
  const maxAliasCount = kind.maxAliasCount ?? defaultMaxAliasCount;
  try {
    return document.toJS({ maxAliasCount }) as unknown;
  } catch (error) {
    // yaml throws a ReferenceError when resolving aliases passes the limit, and for an alias to no anchor.
    if (error instanceof ReferenceError) {
      const limit = /excessive alias count/i.test(error.message);
      throw failure(
        kind,
        file,
        limit
          ? `${file} resolves more YAML aliases than the ${kind.name} limit of ${maxAliasCount}: nested aliases can expand without bound, so the file is refused`
          : `${file} is not valid YAML: ${error.message}`,
        [],
      );
    }
    throw error;
  }
}

/** 1-based line and column of a character offset. */
export function lineAndColumn(text: string, offset: number): { line: number; column: number } {
  let line = 1;
  let lineStart = 0;
  for (let i = text.indexOf('\n'); i !== -1 && i < offset; i = text.indexOf('\n', i + 1)) {
    line++;
    lineStart = i + 1;
  }
  return { line, column: offset - lineStart + 1 };
}

/** Stops the scan at the offset where the text stops being JSON. */
class JsonStop {
  constructor(readonly offset: number) {}
}

const jsonNumber = /-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?/y;

/**
 * The offset of the first character at which `text` stops being JSON (RFC 8259), the text's
 * length when it ends too early. Run only after JSON.parse failed: V8 gives a position
 * for some errors and only a quote of the text around it for others.
 */
export function jsonErrorOffset(text: string): number {
  let i = 0;
  const stop = (): never => {
    throw new JsonStop(i);
  };
  const space = () => {
    while (i < text.length && (text[i] === ' ' || text[i] === '\t' || text[i] === '\n' || text[i] === '\r')) i++;
  };
  const expect = (literal: string) => {
    for (const char of literal) {
      if (text[i] !== char) stop();
      i++;
    }
  };
  const string = () => {
    i++; // the opening quote
    for (;;) {
      const char = text[i];
      if (char === undefined || char < ' ') stop();
      if (char === '"') {
        i++;
        return;
      }
      if (char === '\\') {
        i++;
        if (text[i] === 'u') {
          for (let n = 0; n < 4; n++) {
            i++;
            if (!/[0-9a-fA-F]/.test(text[i] ?? '')) stop();
          }
        } else if (!'"\\/bfnrt'.includes(text[i] ?? '_')) stop();
      }
      i++;
    }
  };
  const value = (): void => {
    space();
    const char = text[i];
    if (char === '{') {
      i++;
      space();
      if (text[i] !== '}') {
        for (;;) {
          space();
          if (text[i] !== '"') stop();
          string();
          space();
          expect(':');
          value();
          space();
          if (text[i] !== ',') break;
          i++;
        }
      }
      expect('}');
      return;
    }
    if (char === '[') {
      i++;
      space();
      if (text[i] !== ']') {
        for (;;) {
          value();
          space();
          if (text[i] !== ',') break;
          i++;
        }
      }
      expect(']');
      return;
    }
    if (char === '"') return string();
    if (char === 't') return expect('true');
    if (char === 'f') return expect('false');
    if (char === 'n') return expect('null');
    jsonNumber.lastIndex = i;
    if (!jsonNumber.test(text)) stop();
    i = jsonNumber.lastIndex;
  };
  try {
    value();
    space();
    return i < text.length ? i : text.length;
  } catch (error) {
    if (error instanceof JsonStop) return error.offset;
    // Nesting deeper than the stack: say nothing more precise than the start.
    if (error instanceof RangeError) return 0;
    throw error;
  }
}

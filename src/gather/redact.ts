/**
 * Redaction of secrets in the text the log bundle writes. Every file that goes into a
 * bundle passes through a `Redactor`, line by line, so a 40 MiB log never sits in memory:
 *
 * 1. PEM private keys: a `-----BEGIN … PRIVATE KEY-----` block becomes one `[REDACTED]`
 *    line, whether it spans many lines (a key printed into a log, a YAML block scalar) or
 *    one (a JSON string with `\n` escapes). Certificates are public and stay.
 * 2. Line rules: credential fields (`client-key-data`, `token`, `password`, AWS secret
 *    keys…), bearer and basic auth, JWTs, kubeadm bootstrap tokens, AWS access key ids,
 *    base64-encoded PEM private keys, passwords in URLs, and `data` of a Secret printed
 *    as JSON on one line.
 * 3. Secret objects in YAML: the values of a Secret's `data`/`stringData` map (keys are
 *    kept). `kubectl` prints `data` before `kind`, so a `data:` map whose object's kind is
 *    not known yet is held back until the kind shows up (or the object ends).
 *
 * `findSecrets` is the detector the bundle's final verification pass runs on what it wrote:
 * it reports exactly what the line rules would still change, plus any private-key marker.
 */
import { StringDecoder } from 'node:string_decoder';
import { Transform, type TransformCallback } from 'node:stream';

/** What replaces a secret. */
export const redacted = '[REDACTED]';

/** A partial line longer than this is processed as a line anyway (bounded memory on binary junk). Default 8 MiB. */
const maxLineLength = 8 * 1024 * 1024;
/** Lines held back while waiting to learn whether a `data:` map belongs to a Secret; past this it is redacted. */
const maxPendingLines = 5000;
const maxPendingBytes = 1024 * 1024;

// ---------------------------------------------------------------------------------------
// Line rules

/** Names of the kinds of secret the rules find; used in counts and verification failures. */
export type SecretKind =
  | 'private-key'
  | 'private-key-base64'
  | 'credential-field'
  | 'bearer-token'
  | 'basic-auth'
  | 'jwt'
  | 'bootstrap-token'
  | 'aws-access-key-id'
  | 'url-password'
  | 'secret-data';

/** Redactions by kind of secret. */
export type Counts = Partial<Record<SecretKind, number>>;

function bump(counts: Counts, kind: SecretKind, by = 1): void {
  counts[kind] = (counts[kind] ?? 0) + by;
}

const privateKeyBegin = /-----BEGIN ([A-Z0-9 ]*)PRIVATE KEY( BLOCK)?-----/;
const privateKeyMarker = /-----BEGIN [A-Z0-9 ]*PRIVATE KEY/;
const pemEnd = /-----END [A-Z0-9 ]*-----/;

/**
 * Field names whose values are credentials, compared lower-cased with `-`, `_` and `.`
 * removed. Exact names, then suffixes (`bootstrapToken`, `aws_secret_access_key`,
 * `adminPassword`…). `automountServiceAccountToken: false` stays: booleans are not secrets.
 */
const credentialNames = new Set(['clientsecret', 'tokensecret', 'authorization']);
const credentialSuffixes = ['token', 'password', 'passwd', 'secretkey', 'secretaccesskey', 'privatekey', 'keydata', 'certificatedata', 'apikey'];

function isCredentialName(name: string): boolean {
  const normalized = name.toLowerCase().replace(/[-_.]/g, '');
  return credentialNames.has(normalized) || credentialSuffixes.some((s) => normalized.endsWith(s));
}

/** Values that are never secrets: empty, booleans, null, already redacted. */
function isHarmlessValue(value: string): boolean {
  const v = value.trim();
  return v === '' || v === '""' || v === "''" || v === '{}' || v === '[]' || /^(true|false|null|~|\[REDACTED\].*)$/i.test(v);
}

/**
 * The end of a credential field's name and its separator: `token: `, `"token":"`,
 * `\\"token\\": `, `--token=`, `aws_secret_access_key = `. Anchored on the name's last
 * word so a line is scanned for a few literals, not for every `word:`. Group 1: that word;
 * 2: a closing quote (with its escaping backslashes).
 */
const credentialFieldEnd =
  /(token|passw(?:or)?d|secret[-_.]?(?:access[-_.]?)?key|private[-_.]?key|key[-_.]?data|certificate[-_.]?data|api[-_.]?key|client[-_.]?secret|token[-_.]?secret|authorization)(\\*["'])?[ \t]*[:=][ \t]*/gi;
const nameChar = /[\w.-]/;

interface FieldScan {
  line: string;
  /** Set when the field's value is a YAML block scalar (`password: |`): its lines follow, deeper. */
  blockScalarIndent?: number;
}

/** Replaces the values of credential fields on one line. */
function redactFields(line: string, counts: Counts): FieldScan {
  credentialFieldEnd.lastIndex = 0;
  if (!credentialFieldEnd.test(line)) return { line };
  let out = '';
  let last = 0;
  let blockScalarIndent: number | undefined;
  credentialFieldEnd.lastIndex = 0;
  for (let m = credentialFieldEnd.exec(line); m !== null; m = credentialFieldEnd.exec(line)) {
    // The whole name: back over name characters from the matched last word.
    let nameStart = m.index;
    while (nameStart > 0 && nameChar.test(line[nameStart - 1] ?? '')) nameStart--;
    const name = line.slice(nameStart, m.index + (m[1] ?? '').length);
    const closingQuote = m[2] ?? '';
    if (closingQuote !== '' && line.slice(nameStart - closingQuote.length, nameStart) !== closingQuote) continue;
    if (!isCredentialName(name)) continue;
    const keyStart = nameStart - closingQuote.length;
    const atLineStart = keyStart === leadingKeyColumn(line);
    const span = valueSpan(line, m.index + m[0].length, atLineStart);
    if (span === undefined) continue;
    const value = line.slice(span.start, span.end);
    if (/^[|>][+-]?\d*$/.test(value.trim()) && atLineStart) {
      // `password: |` — the secret is on the following, more indented lines.
      blockScalarIndent = keyStart;
      continue;
    }
    // A structured value (`"Secret":{"name":…}` in a controller log) names an object; it is not a credential.
    if (isHarmlessValue(value) || /^[{[]/.test(value)) continue;
    out += line.slice(last, span.start) + redacted;
    last = span.end;
    credentialFieldEnd.lastIndex = span.end;
    bump(counts, 'credential-field');
  }
  return blockScalarIndent === undefined ? { line: out + line.slice(last) } : { line: out + line.slice(last), blockScalarIndent };
}

/** Column of a YAML key at the start of a line (after indentation and `- `), or -1. */
function leadingKeyColumn(line: string): number {
  const m = /^( *(?:- +)*)["']?[A-Za-z]/.exec(line);
  return m ? (m[1] ?? '').length : -1;
}

/** Where a field's value starts and ends: a quoted string, the rest of a YAML line, or a bare word. */
function valueSpan(line: string, start: number, wholeLine: boolean): { start: number; end: number } | undefined {
  if (start >= line.length) return undefined;
  const quote = /^(\\*)(["'])/.exec(line.slice(start));
  if (quote) {
    const closing = (quote[1] ?? '') + (quote[2] ?? '');
    const inner = start + closing.length;
    let end = line.indexOf(closing, inner);
    // An escaped quote of the same depth inside the value (`\"` in a JSON string) does not close it.
    while (end > 0 && closing.length === 1 && line[end - 1] === '\\') end = line.indexOf(closing, end + 1);
    if (end < 0) end = line.length;
    return end === inner ? undefined : { start: inner, end };
  }
  if (wholeLine) {
    // A YAML value: everything up to a trailing comment.
    const rest = line.slice(start);
    const comment = rest.search(/\s#/);
    const end = comment >= 0 ? start + comment : line.length;
    return end > start ? { start, end: start + rest.slice(0, end - start).trimEnd().length } : undefined;
  }
  const bare = /^[^\s,;&}\])"']+/.exec(line.slice(start));
  return bare ? { start, end: start + bare[0].length } : undefined;
}

interface LineRule {
  kind: SecretKind;
  /** Cheap test: the rule runs only on lines that match it. */
  prefilter: RegExp;
  pattern: RegExp;
  replace: (match: string, ...groups: string[]) => string;
}

/** The JWT header is base64url JSON, so it starts `eyJ`; the payload too, the signature may be empty. */
const jwtPattern = /\beyJ[A-Za-z0-9_-]{6,}\.[A-Za-z0-9_-]{6,}\.[A-Za-z0-9_-]*/g;

const lineRules: LineRule[] = [
  {
    kind: 'private-key-base64',
    prefilter: /LS0tLS1CRUdJTi/,
    // base64 of `-----BEGIN`; redacted when it decodes to a private key (kubeconfig client-key-data, Secret data).
    pattern: /LS0tLS1CRUdJTi[A-Za-z0-9+/]*={0,2}/g,
    replace: (match) => (isBase64PrivateKey(match) ? redacted : match),
  },
  {
    kind: 'jwt',
    prefilter: /eyJ/,
    pattern: jwtPattern,
    replace: () => redacted,
  },
  {
    kind: 'bearer-token',
    prefilter: /bearer/i,
    // A word after "Bearer" is a token when it has a digit or is long (so "bearer authentication" stays).
    pattern: /\b(bearer)(\s+)(?!\[REDACTED\])([A-Za-z0-9._~+/-]{8,}=*)/gi,
    replace: (match, word = '', space = '', token = '') => (/\d/.test(token) || token.length >= 20 ? `${word}${space}${redacted}` : match),
  },
  {
    kind: 'basic-auth',
    prefilter: /basic/i,
    pattern: /\b(authorization\W{0,6}basic)(\s+)(?!\[REDACTED\])([A-Za-z0-9+/]{4,}=*)/gi,
    replace: (_m, head = '', space = '') => `${head}${space}${redacted}`,
  },
  {
    kind: 'aws-access-key-id',
    prefilter: /A[KSGIRPN][A-Z]A/,
    pattern: /\b(?:AKIA|ASIA|AGPA|AIDA|AROA|AIPA|ANPA|ANVA|ABIA|ACCA)[A-Z0-9]{16}\b/g,
    replace: () => redacted,
  },
  {
    kind: 'url-password',
    prefilter: /:\/\/[^\s/@]*:[^\s/@]*@/,
    pattern: /\b([a-z][a-z0-9+.-]*:\/\/[^\s:@/]+):(?!\[REDACTED\]@)([^\s@/]+)@/gi,
    replace: (_m, head = '') => `${head}:${redacted}@`,
  },
];

function isBase64PrivateKey(text: string): boolean {
  const head = text.slice(0, 80 - (80 % 4));
  const decoded = Buffer.from(head, 'base64').toString('latin1');
  return privateKeyMarker.test(decoded);
}

/** A Secret printed as JSON on one line (a log line, a last-applied-configuration annotation), quotes escaped or not. */
const jsonSecretKind = /\\*"kind\\*"\s*:\s*\\*"Secret\\*"/;
const jsonDataMap = /(\\*"(?:data|stringData)\\*"\s*:\s*\{)([^{}]*)(\})/g;
const jsonEntry = /(\\*")([^"\\]*)\1(\s*:\s*)\1(.*?)\1(?=\s*(?:,|$))/g;

function redactJsonSecretData(line: string, counts: Counts): string {
  if (!line.includes('Secret') || !jsonSecretKind.test(line)) return line;
  return line.replace(jsonDataMap, (_m, open: string, body: string, close: string) => {
    const inner = body.replace(jsonEntry, (entry, q: string, key: string, sep: string, value: string) => {
      if (value === '' || value === redacted) return entry;
      bump(counts, 'secret-data');
      return `${q}${key}${q}${sep}${q}${redacted}${q}`;
    });
    return `${open}${inner}${close}`;
  });
}

/**
 * kubeadm bootstrap tokens, `abcdef.0123456789abcdef`: a join credential for any node.
 * Found from the dot (a literal the regex engine scans for fast), then checked backwards.
 */
function redactBootstrapTokens(line: string, counts: Counts): string {
  const tail = /\.[a-z0-9]{16}(?![\w.-])/g;
  let out = '';
  let last = 0;
  for (let m = tail.exec(line); m !== null; m = tail.exec(line)) {
    const start = m.index - 6;
    if (start < last || !/^[a-z0-9]{6}$/.test(line.slice(start, m.index)) || nameChar.test(line[start - 1] ?? ' ')) continue;
    out += line.slice(last, start) + redacted;
    last = m.index + m[0].length;
    bump(counts, 'bootstrap-token');
  }
  return last === 0 ? line : out + line.slice(last);
}

/** Applies every single-line rule (not the multi-line PEM and Secret-YAML states). */
function redactLineRules(line: string, counts: Counts): FieldScan {
  let text = redactBootstrapTokens(line, counts);
  for (const rule of lineRules) {
    if (!rule.prefilter.test(text)) continue;
    rule.pattern.lastIndex = 0;
    text = text.replace(rule.pattern, (match: string, ...rest: unknown[]) => {
      const groups = rest.filter((g): g is string => typeof g === 'string');
      const replaced = rule.replace(match, ...groups);
      if (replaced !== match) bump(counts, rule.kind);
      return replaced;
    });
  }
  text = redactJsonSecretData(text, counts);
  return redactFields(text, counts);
}

/**
 * What survived redaction on one line: the kinds of secret the rules would still change,
 * plus any private-key PEM marker and any known Secret value. Empty for every line a
 * `Redactor` with the same known values wrote.
 */
export function findSecrets(line: string, knownValues?: RegExp): SecretKind[] {
  const counts: Counts = {};
  if (privateKeyMarker.test(line)) bump(counts, 'private-key');
  redactLineRules(line, counts);
  // Secret data in YAML depends on context a single line may not show: it is checked by construction.
  delete counts['secret-data'];
  if (knownValues) {
    knownValues.lastIndex = 0;
    if (knownValues.test(line)) bump(counts, 'secret-data');
  }
  return Object.keys(counts) as SecretKind[];
}

/** Known Secret values shorter than this are not matched literally (too likely to be ordinary words). */
const minKnownValueLength = 12;

/**
 * The values of a Secret's data worth looking for literally in logs: each base64 value and
 * its decoded text when that is one line, long enough and not a plain word (`cloud-config`).
 * Multi-line values (kubeconfigs, PEM, cloud-init) are caught by the pattern rules instead.
 */
export function secretValuesToMatch(data: Record<string, string> | undefined): string[] {
  const values: string[] = [];
  for (const encoded of Object.values(data ?? {})) {
    if (typeof encoded !== 'string') continue;
    if (encoded.length >= minKnownValueLength) values.push(encoded);
    const decoded = Buffer.from(encoded, 'base64').toString('utf8');
    const plainWord = /^[a-z]+([-_. ][a-z]+)*$/i.test(decoded);
    if (decoded.length >= minKnownValueLength && !/[\n\r]/.test(decoded) && !decoded.includes('\ufffd') && !plainWord) values.push(decoded.trim());
  }
  return values.filter((v) => v.length >= minKnownValueLength);
}

/** One pattern matching any of `values` (longest first), or undefined when there are none. */
export function knownValuesPattern(values: Iterable<string>): RegExp | undefined {
  const unique = [...new Set(values)].filter((v) => v.length > 0).sort((a, b) => b.length - a.length);
  if (unique.length === 0) return undefined;
  return new RegExp(unique.map((v) => v.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('|'), 'g');
}

// ---------------------------------------------------------------------------------------
// Stage 1: PEM private key blocks

/** Turns private-key PEM blocks into one `[REDACTED]` line; certificates pass. */
class PemFilter {
  /** Set inside a multi-line block: the text before `-----BEGIN` on its first line. */
  private blockPrefix: string | undefined;
  private sawBody = false;

  constructor(private readonly counts: Counts) {}

  push(line: string): string[] {
    if (this.blockPrefix !== undefined) {
      const prefix = this.blockPrefix;
      const end = pemEnd.exec(line);
      if (end) {
        this.blockPrefix = undefined;
        const after = line.slice(end.index + end[0].length);
        return after.trim() === '' ? [] : this.push(after);
      }
      const body = (line.startsWith(prefix) ? line.slice(prefix.length) : line).trim();
      const isBody = /^[A-Za-z0-9+/=]*$/.test(body) || (!this.sawBody && /^[A-Z][A-Za-z0-9-]*:\s/.test(body));
      if (isBody) {
        if (/^[A-Za-z0-9+/=]+$/.test(body)) this.sawBody = true;
        return [];
      }
      // Not key material: the block was cut short (a truncated log). Carry on with this line.
      this.blockPrefix = undefined;
    }
    return [this.redactMarkers(line)].filter((l): l is string => l !== undefined);
  }

  private redactMarkers(line: string): string | undefined {
    let text = line;
    let from = 0;
    for (;;) {
      const begin = privateKeyBegin.exec(text.slice(from));
      if (!begin) return text;
      const start = from + begin.index;
      const afterBegin = start + begin[0].length;
      bump(this.counts, 'private-key');
      const end = pemEnd.exec(text.slice(afterBegin));
      if (end) {
        // The whole key on one line (JSON with `\n` escapes, a one-line dump).
        const stop = afterBegin + end.index + end[0].length;
        text = text.slice(0, start) + redacted + text.slice(stop);
        from = start + redacted.length;
        continue;
      }
      const rest = text.slice(afterBegin);
      if (/^[\s"'`]*$/.test(rest)) {
        // The key goes on over the next lines.
        this.blockPrefix = text.slice(0, start);
        this.sawBody = false;
        return text.slice(0, start) + redacted + rest;
      }
      // A key cut off on this line (a truncated message): drop the rest of the line.
      return text.slice(0, start) + redacted;
    }
  }
}

// ---------------------------------------------------------------------------------------
// Stage 2: block-scalar values of credential fields (`password: |`)

class LineRuleFilter {
  /** Column of the key whose block scalar value is being redacted. */
  private blockIndent: number | undefined;

  constructor(
    private readonly counts: Counts,
    private readonly knownValues: RegExp | undefined,
  ) {}

  push(line: string): string {
    if (this.blockIndent !== undefined) {
      const indent = /^ */.exec(line)?.[0].length ?? 0;
      if (line.trim() === '') return line;
      if (indent > this.blockIndent) return `${' '.repeat(indent)}${redacted}`;
      this.blockIndent = undefined;
    }
    const scan = redactLineRules(line, this.counts);
    if (scan.blockScalarIndent !== undefined) {
      this.blockIndent = scan.blockScalarIndent;
      bump(this.counts, 'credential-field');
    }
    if (!this.knownValues) return scan.line;
    return scan.line.replace(this.knownValues, () => {
      bump(this.counts, 'secret-data');
      return redacted;
    });
  }
}

// ---------------------------------------------------------------------------------------
// Stage 3: data/stringData of Secret objects in YAML

interface YamlLine {
  blank: boolean;
  docMarker: boolean;
  /** Column of the content (after indentation and list dashes). */
  col: number;
  /** The line starts a list item (`- `): a new mapping at `col`. */
  newItem: boolean;
  key?: string;
  value?: string;
}

function parseYamlLine(line: string): YamlLine {
  if (/^(---|\.\.\.)(\s|$)/.test(line)) return { blank: false, docMarker: true, col: 0, newItem: false };
  const m = /^( *)((?:- +)*)(.*)$/.exec(line);
  const content = m?.[3] ?? '';
  const col = (m?.[1] ?? '').length + (m?.[2] ?? '').length;
  const newItem = (m?.[2] ?? '') !== '';
  if (content.trim() === '' || content.startsWith('#')) return { blank: true, docMarker: false, col, newItem };
  const kv = /^(?:"([^"]*)"|'([^']*)'|([A-Za-z0-9_./-]+))[ \t]*:(?:[ \t]+(.*))?$/.exec(content.replace(/\s+$/, ''));
  if (!kv) return { blank: false, docMarker: false, col, newItem };
  return { blank: false, docMarker: false, col, newItem, key: kv[1] ?? kv[2] ?? kv[3] ?? '', value: (kv[4] ?? '').trim() };
}

function scalarOf(value: string): string {
  return value.replace(/\s+#.*$/, '').replace(/^["']|["']$/g, '');
}

const isDataKey = (l: YamlLine) => (l.key === 'data' || l.key === 'stringData') && (l.value === '' || l.value?.startsWith('{') === true);

/** A `data:` map being replaced: its column and the column of its keys once seen. */
interface DataMap {
  col: number;
  keyCol?: number;
}

class SecretYamlFilter {
  /** Kind of the mapping at each column, as seen so far. */
  private readonly kinds = new Map<number, string>();
  private redacting: DataMap | undefined;
  private pending: { map: DataMap; head: string; mapLines: string[]; after: string[]; inMap: boolean; bytes: number } | undefined;

  constructor(private readonly counts: Counts) {}

  push(line: string): string[] {
    if (this.pending) return this.pushPending(line);
    return this.process(line);
  }

  end(): string[] {
    // The object ended without saying its kind: not known to be a Secret.
    return this.pending ? this.decide(false) : [];
  }

  private process(line: string): string[] {
    const info = parseYamlLine(line);
    if (this.redacting) {
      const out = this.redactMapLine(this.redacting, line, info);
      if (out !== null) return out === undefined ? [] : [out];
      this.redacting = undefined;
    }
    this.track(info);
    if (!isDataKey(info)) return [line];
    const kind = this.kinds.get(info.col);
    if (kind === 'Secret') return [this.startMap(info, line)];
    if (kind !== undefined) return [line];
    this.pending = { map: { col: info.col }, head: line, mapLines: [], after: [], inMap: true, bytes: line.length };
    return [];
  }

  private startMap(info: YamlLine, line: string): string {
    if (info.value?.startsWith('{')) return this.redactFlow(line);
    this.redacting = { col: info.col };
    return line;
  }

  /** `data: {a: b, "c": "d"}` → values replaced. */
  private redactFlow(line: string): string {
    return line.replace(/([{,]\s*)([^:,{}]+?)(\s*:\s*)([^,}]+)/g, (m, open: string, key: string, sep: string, value: string) => {
      if (value.trim() === redacted) return m;
      bump(this.counts, 'secret-data');
      return `${open}${key}${sep}${redacted}`;
    });
  }

  /** One line inside a Secret's data map: the replaced line, undefined to drop it, or null when the map has ended. */
  private redactMapLine(map: DataMap, line: string, info: YamlLine): string | undefined | null {
    if (info.blank) return line;
    if (info.docMarker || info.col <= map.col) return null;
    map.keyCol ??= info.col;
    if (info.col > map.keyCol) return undefined; // continuation of a multi-line value
    if (info.value === redacted) return line;
    bump(this.counts, 'secret-data');
    if (info.key === undefined) return `${line.slice(0, info.col)}${redacted}`;
    const keyEnd = line.indexOf(':', info.col);
    return `${line.slice(0, keyEnd + 1)} ${redacted}`;
  }

  private track(info: YamlLine): void {
    if (info.docMarker) {
      this.kinds.clear();
      return;
    }
    if (info.blank) return;
    for (const col of [...this.kinds.keys()]) if (col > info.col || (col === info.col && info.newItem)) this.kinds.delete(col);
    if (info.key === 'kind' && info.value) this.kinds.set(info.col, scalarOf(info.value));
  }

  private pushPending(line: string): string[] {
    const p = this.pending!;
    const info = parseYamlLine(line);
    p.bytes += line.length;
    if (p.inMap && (info.blank || (!info.docMarker && info.col > p.map.col))) {
      p.mapLines.push(line);
    } else {
      p.inMap = false;
      p.after.push(line);
      const sibling = !info.blank && !info.docMarker && info.col === p.map.col && !info.newItem;
      if (sibling && info.key === 'kind') return this.decide(scalarOf(info.value ?? '') === 'Secret');
      // The object ended (a new document, a shallower line, the next list item, a line that is not YAML).
      const ended = info.docMarker || (!info.blank && (info.col < p.map.col || (info.col === p.map.col && (info.newItem || info.key === undefined))));
      if (ended) return this.decide(false);
    }
    // Held back too long: redact rather than guess.
    if (p.mapLines.length + p.after.length > maxPendingLines || p.bytes > maxPendingBytes) return this.decide(true);
    return [];
  }

  /** Emits the held-back map (redacted when it belongs to a Secret), then processes the lines after it again. */
  private decide(isSecret: boolean): string[] {
    const p = this.pending!;
    this.pending = undefined;
    const out: string[] = [];
    const headInfo = parseYamlLine(p.head);
    if (isSecret) {
      out.push(this.startMap(headInfo, p.head));
      const map = this.redacting;
      this.redacting = undefined;
      for (const line of p.mapLines) {
        const replaced = map ? this.redactMapLine(map, line, parseYamlLine(line)) : line;
        if (typeof replaced === 'string') out.push(replaced);
      }
    } else {
      out.push(p.head, ...p.mapLines);
    }
    for (const line of p.after) out.push(...this.push(line));
    return out;
  }
}

// ---------------------------------------------------------------------------------------
// The redactor

/**
 * A streaming redactor: feed it text in chunks of any size (a chunk may end mid-line or
 * mid-key), get back redacted text for the complete lines seen so far.
 */
export interface RedactorOptions {
  /** Values to replace wherever they appear (the data of the cluster's Secrets): see `knownValuesPattern`. Default none. */
  knownValues?: RegExp;
}

export class Redactor {
  /** Redactions made so far, by kind of secret. */
  readonly counts: Counts = {};
  private readonly pem = new PemFilter(this.counts);
  private readonly rules: LineRuleFilter;
  private readonly secrets = new SecretYamlFilter(this.counts);
  private partial = '';

  constructor(options: RedactorOptions = {}) {
    this.rules = new LineRuleFilter(this.counts, options.knownValues);
  }

  /** Total redactions made so far. */
  get total(): number {
    return Object.values(this.counts).reduce((a, b) => a + b, 0);
  }

  write(chunk: string): string {
    const text = this.partial + chunk;
    let out = '';
    let start = 0;
    for (let newline = text.indexOf('\n'); newline >= 0; newline = text.indexOf('\n', start)) {
      out += this.line(text.slice(start, newline));
      start = newline + 1;
    }
    this.partial = text.slice(start);
    if (this.partial.length > maxLineLength) {
      // Not text with lines (or a pathological line): cut it here rather than hold it all.
      out += this.line(this.partial);
      this.partial = '';
    }
    return out;
  }

  /** Flushes the last (unterminated) line and anything held back. */
  end(): string {
    const unterminated = this.partial !== '';
    let out = unterminated ? this.line(this.partial) : '';
    this.partial = '';
    out += this.secrets.end().map((l) => `${l}\n`).join('');
    // The input did not end with a newline: neither does the output.
    return unterminated && out.endsWith('\n') ? out.slice(0, -1) : out;
  }

  private line(raw: string): string {
    const cr = raw.endsWith('\r');
    const line = cr ? raw.slice(0, -1) : raw;
    let out = '';
    for (const a of this.pem.push(line)) {
      for (const c of this.secrets.push(this.rules.push(a))) out += `${c}${cr ? '\r' : ''}\n`;
    }
    return out;
  }
}

/** Redacts a whole text; for small inputs and tests. */
export function redactText(text: string, options: RedactorOptions = {}): { text: string; counts: Counts; total: number } {
  const redactor = new Redactor(options);
  const out = redactor.write(text) + redactor.end();
  return { text: out, counts: redactor.counts, total: redactor.total };
}

/** A Transform stream that redacts bytes (UTF-8) passing through; `redactor` holds the counts. */
export function createRedactStream(options: RedactorOptions = {}): Transform & { redactor: Redactor } {
  const redactor = new Redactor(options);
  const decoder = new StringDecoder('utf8');
  const stream = new Transform({
    transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback) {
      const out = redactor.write(decoder.write(chunk));
      callback(null, out === '' ? undefined : out);
    },
    flush(callback: TransformCallback) {
      const out = redactor.write(decoder.end()) + redactor.end();
      callback(null, out === '' ? undefined : out);
    },
  });
  return Object.assign(stream, { redactor });
}

// ---------------------------------------------------------------------------------------
// Objects

/** Annotations that carry a copy of an object, Secret data included. */
const copyAnnotations = ['kubectl.kubernetes.io/last-applied-configuration'];

/**
 * A copy of an object fit for the bundle: managedFields dropped (noise), and for a Secret
 * every `data`/`stringData` value replaced (keys kept) and copies of it in annotations
 * dropped. Lists (`items`) are handled item by item.
 */
export function redactObject<T extends { kind?: unknown; metadata?: unknown }>(obj: T): T {
  const copy = { ...obj } as T & { metadata?: Record<string, unknown>; items?: unknown; data?: unknown; stringData?: unknown };
  if (copy.metadata && typeof copy.metadata === 'object') {
    const { managedFields: _dropped, ...metadata } = copy.metadata;
    copy.metadata = metadata;
  }
  if (Array.isArray(copy.items)) {
    copy.items = copy.items.map((item: unknown) => (item && typeof item === 'object' ? redactObject(item as { kind?: unknown }) : item));
  }
  if (copy.kind === 'Secret') {
    for (const field of ['data', 'stringData'] as const) {
      const map = copy[field];
      if (map && typeof map === 'object') copy[field] = Object.fromEntries(Object.keys(map).map((k) => [k, redacted]));
    }
    const annotations = (copy.metadata?.annotations ?? undefined) as Record<string, string> | undefined;
    if (annotations) {
      const kept = Object.fromEntries(Object.entries(annotations).map(([k, v]) => [k, copyAnnotations.includes(k) ? redacted : v]));
      copy.metadata = { ...copy.metadata, annotations: kept };
    }
  }
  return copy;
}

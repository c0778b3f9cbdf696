/**
 * The offline check of an AWS shared credentials file (the aws platform's pre-provision
 * hook): readable, an INI file with the install config's profile, and both keys in it.
 * Nothing here can tell whether AWS accepts the keys; CAPA finds out when it first calls
 * AWS. Messages name the file, the profile and the key, never a value.
 */
import { readFile } from 'node:fs/promises';
import { ConfigError, messageOf, type FieldProblem } from '../../errors.js';

/** The keys CAPA's SDK needs from a profile (a session token is optional). */
const requiredCredentialKeys = ['aws_access_key_id', 'aws_secret_access_key'] as const;

/** Sections of an INI text and their keys (values are kept only to test they are non-empty). */
function parseIni(text: string): { sections: Map<string, Map<string, string>>; badLines: number[] } {
  const sections = new Map<string, Map<string, string>>();
  const badLines: number[] = [];
  let current: Map<string, string> | undefined;
  text.split(/\r?\n/).forEach((raw, index) => {
    const line = raw.trim();
    if (line === '' || line.startsWith('#') || line.startsWith(';')) return;
    const header = /^\[\s*([^\]]+?)\s*\]$/.exec(line);
    if (header) {
      current = sections.get(header[1]!) ?? new Map<string, string>();
      sections.set(header[1]!, current);
      return;
    }
    const pair = /^([A-Za-z0-9_.-]+)\s*=\s*(.*)$/.exec(line);
    // A key outside any section, or a line that is neither: not the file the SDK reads.
    if (!pair || !current) badLines.push(index + 1);
    else current.set(pair[1]!.toLowerCase(), pair[2]!);
  });
  return { sections, badLines };
}

/** Throws a ConfigError on field `field` (e.g. platform.aws.credentials.file) unless `file` holds both keys for `profile`. */
export async function checkCredentialsFile(file: string, profile: string, field: string): Promise<void> {
  const fail = (message: string, hint: string): never => {
    const problem: FieldProblem = { path: field, message, hint };
    throw new ConfigError(`The AWS credentials file cannot be used: ${message}`, [problem], { hint });
  };
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (error) {
    return fail(`${file} cannot be read (${messageOf(error)})`, 'create it with `aws configure`, or point platform.aws.credentials.file at your shared credentials file');
  }
  const { sections, badLines } = parseIni(text);
  if (badLines.length > 0) {
    fail(`${file} is not an INI file: line ${badLines.slice(0, 5).join(', ')} is neither a [section] nor key = value`, 'write it in the AWS shared credentials format: [profile] followed by aws_access_key_id = … and aws_secret_access_key = …');
  }
  const section = sections.get(profile);
  if (!section) {
    const known = [...sections.keys()];
    fail(`${file} has no profile [${profile}]${known.length ? ` (it has: ${known.join(', ')})` : ''}`, 'set platform.aws.credentials.profile to one of its profiles, or add the profile to the file');
  }
  const missing = requiredCredentialKeys.filter((key) => !section!.get(key));
  if (missing.length > 0) fail(`profile [${profile}] of ${file} has no ${missing.join(' and no ')}`, 'add both keys to the profile (`aws configure --profile <name>` writes them)');
}

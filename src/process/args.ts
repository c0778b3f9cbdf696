/**
 * Command-line arguments as defaults plus overrides (envtest's model): the caller keeps a
 * record of flag -> value for each binary, the user or a platform overrides some, and the
 * result renders in one stable order, so the same configuration always gives the same args
 * (and the same args hash in the pidfile).
 */
import { createHash } from 'node:crypto';

/**
 * A flag's value: string or number -> `--flag=value`; true -> `--flag`; false -> `--flag=false`;
 * an array -> the flag repeated once per element, in array order (join it yourself for flags
 * that take a comma list); null or undefined -> the flag is left out (an override removes a default).
 */
export type ArgValue = string | number | boolean | readonly string[] | null | undefined;
export type ArgMap = Readonly<Record<string, ArgValue>>;

/**
 * Renders `defaults` merged with `overrides` (an override replaces the default of the same
 * flag) as `--flag=value` arguments, **sorted by flag name** (code-point order), so the output
 * does not depend on the order keys were added. Flag names are given without leading dashes.
 */
export function renderArgs(defaults: ArgMap, overrides: ArgMap = {}): string[] {
  const merged: Record<string, ArgValue> = { ...defaults, ...overrides };
  const args: string[] = [];
  for (const flag of Object.keys(merged).sort()) {
    if (flag.startsWith('-') || flag.includes('=')) throw new TypeError(`Flag name ${JSON.stringify(flag)} must have no dashes or '='`);
    const value = merged[flag];
    if (value === null || value === undefined) continue;
    if (value === true) args.push(`--${flag}`);
    else if (value === false) args.push(`--${flag}=false`);
    else if (typeof value === 'string' || typeof value === 'number') args.push(`--${flag}=${value}`);
    else for (const item of value) args.push(`--${flag}=${item}`);
  }
  return args;
}

/** sha256 (hex) of a binary path and its args: tells whether a recorded process ran the same command. */
export function hashArgs(binary: string, args: readonly string[]): string {
  return createHash('sha256').update(JSON.stringify([binary, ...args])).digest('hex');
}

import { readFileSync } from 'node:fs';

/** The CLI's own version, from package.json (read once at start-up). */
export const cliVersion: string = (
  JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }
).version;

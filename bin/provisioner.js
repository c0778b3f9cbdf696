#!/usr/bin/env node
// Thin launcher: the compiled CLI lives in dist/ (`npm run build`).
import { existsSync } from 'node:fs';

const entry = new URL('../dist/main.js', import.meta.url);
if (!existsSync(entry)) {
  process.stderr.write('provisioner is not built: run `npm run setup` in the package directory first.\n');
  process.exit(4);
}
await import(entry.href);

import type { Command } from 'commander';
import type { Runner } from '../program.js';
import { registerManagement } from './management.js';
import { registerVersion } from './version.js';

/** Every command, in the order `--help` lists them. One line per command file. */
export function registerCommands(program: Command, run: Runner): void {
  registerManagement(program, run);
  registerVersion(program, run);
}

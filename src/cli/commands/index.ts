import type { Command } from 'commander';
import type { Runner } from '../program.js';
import { registerCreate } from './create.js';
import { registerDestroy } from './destroy.js';
import { registerDiff } from './diff.js';
import { registerExplain } from './explain.js';
import { registerGather } from './gather.js';
import { registerHosts } from './hosts.js';
import { registerImages } from './images.js';
import { registerImport } from './import.js';
import { registerManagement } from './management.js';
import { registerPivot } from './pivot.js';
import { registerPlan } from './plan.js';
import { registerRegister } from './register.js';
import { registerVersion } from './version.js';
import { registerWaitFor } from './wait-for.js';

/**
 * Every command group, in the order `--help` lists them: one file per group, with its
 * subcommands (`create cluster`, the largest, has a file of its own that create.ts calls).
 * Command files declare names, flags and help only; each action imports what it runs
 * (services, the Kubernetes client, ink), so `--help` and `--version` load none of it
 * (src/cli/startup.test.ts checks that).
 */
export function registerCommands(program: Command, run: Runner): void {
  registerCreate(program, run);
  registerDestroy(program, run);
  registerDiff(program, run);
  registerExplain(program, run);
  registerGather(program, run);
  registerWaitFor(program, run);
  registerManagement(program, run);
  registerPivot(program, run);
  registerRegister(program, run);
  registerImport(program, run);
  registerHosts(program, run);
  registerPlan(program, run);
  registerImages(program, run);
  registerVersion(program, run);
}

/**
 * Every flag has an environment twin, and the README says which: its Commands table names
 * every command the program has with exactly its flags, and its table of environment twins
 * pairs every flag of every command with its variable. Walks the commander program itself, so a flag added
 * without `.env(...)` or without a README row fails here.
 */
import { readFileSync } from 'node:fs';
import { CommanderError, type Command, type Option } from 'commander';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { buildProgram } from './program.js';

const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');

/** The program with `create install-config`'s flags declared (they are added when it is about to parse: its --help does that). */
async function fullProgram(): Promise<Command> {
  const program = buildProgram({ stdout: { write: () => true }, stderr: { write: () => true }, signal: new AbortController().signal, onRenderer: () => {} });
  vi.spyOn(process.stdout, 'write').mockImplementation(() => true);
  await program.parseAsync(['node', 'provisioner', 'create', 'install-config', '--help']).catch((error: unknown) => {
    if (!(error instanceof CommanderError && error.code === 'commander.helpDisplayed')) throw error;
  });
  return program;
}

afterEach(() => {
  vi.restoreAllMocks();
});

/** Every command without subcommands, by its words (`destroy cluster`), with the root's options folded in where they apply. */
function leafCommands(command: Command, words: string[] = []): { name: string; options: readonly Option[] }[] {
  if (command.commands.length === 0) return [{ name: words.join(' '), options: command.options }];
  return command.commands.flatMap((sub) => leafCommands(sub, [...words, sub.name()]));
}

/** `--version` prints and exits: a switch of the program, not a setting an environment could hold. */
const withoutTwin = new Set(['--version']);

/** (command, flag, variable) for every option of the program; the program's own (global) options under the name `provisioner`. */
async function programTwins(): Promise<string[]> {
  const program = await fullProgram();
  const rows = [{ name: 'provisioner', options: program.options }, ...leafCommands(program)].flatMap(({ name, options }) =>
    options.filter((o) => !withoutTwin.has(o.long ?? '')).map((o) => `${name} ${o.long} ${o.envVar ?? '(none)'}`),
  );
  return rows.sort();
}

/** The rows of the README table that follows `heading`, as arrays of cells (header and rule skipped). */
function tableAfter(heading: string): string[][] {
  const start = readme.indexOf(heading);
  expect(start, `README has "${heading}"`).toBeGreaterThanOrEqual(0);
  const lines = readme.slice(start).split('\n');
  const first = lines.findIndex((l) => l.startsWith('|'));
  const table = [];
  for (const line of lines.slice(first + 2)) {
    if (!line.startsWith('|')) break;
    table.push(line.slice(1, -1).split(/(?<!\\)\|/).map((cell) => cell.trim()));
  }
  return table;
}

/** The code spans of a cell, `\|` read as `|`. */
function codeSpans(cell: string): string[] {
  return [...cell.matchAll(/`([^`]+)`/g)].map((m) => (m[1] ?? '').replace(/\\\|/g, '|'));
}

/** `management start|stop|status --dir D` → the commands it names: leading lower-case words, alternatives expanded. */
function commandsOf(usage: string): string[] {
  const words: string[][] = [];
  for (const token of usage.split(' ')) {
    if (!/^[a-z][a-z-]*(\|[a-z][a-z-]*)*$/.test(token)) break;
    words.push(token.split('|'));
  }
  return words.reduce<string[]>((names, alternatives) => names.flatMap((n) => alternatives.map((a) => (n ? `${n} ${a}` : a))), ['']);
}

describe('environment twins', () => {
  it('every flag of every command has one', async () => {
    expect((await programTwins()).filter((row) => row.endsWith('(none)'))).toEqual([]);
  });

  it("the README's Commands table names exactly the program's commands", async () => {
    const documented = tableAfter('## Commands').flatMap((row) => codeSpans(row[0] ?? '').flatMap(commandsOf));
    const program = await fullProgram();
    expect([...new Set(documented)].sort()).toEqual(leafCommands(program).map((c) => c.name).sort());
  });

  it("the README's table of twins pairs every flag with the variable the program reads", async () => {
    const documented = tableAfter('### Environment twins').flatMap(([flag, variable, commands]) => {
      const [long] = codeSpans(flag ?? '');
      const [env] = codeSpans(variable ?? '');
      return codeSpans(commands ?? '').map((command) => `${command} ${long} ${env}`);
    });
    expect(documented.sort()).toEqual(await programTwins());
  });

  it("the README's Commands table gives each command exactly the flags it has", async () => {
    const program = await fullProgram();
    const global = new Set(program.options.map((o) => o.long));
    const declared = new Map(leafCommands(program).map((c) => [c.name, c.options.map((o) => o.long ?? '').filter((f) => !global.has(f)).sort()]));
    const rows = tableAfter('## Commands').flatMap((row) =>
      codeSpans(row[0] ?? '').flatMap((usage) => {
        const flags = [...new Set([...usage.matchAll(/(?<![\w-])(--[a-z][a-z-]*|-[a-z])\b/g)].map((m) => m[1] ?? ''))];
        // A short flag in the usage stands for its long one.
        const longs = (name: string) => flags.map((f) => (f.startsWith('--') ? f : (leafCommands(program).find((c) => c.name === name)?.options.find((o) => o.short === f)?.long ?? f)));
        return commandsOf(usage).map((name) => ({ name, flags: longs(name) }));
      }),
    );
    const documented = new Map<string, Set<string>>();
    for (const { name, flags } of rows) documented.set(name, new Set([...(documented.get(name) ?? []), ...flags]));
    const differences = [...declared].flatMap(([name, flags]) => {
      const readmeFlags = [...(documented.get(name) ?? [])].sort();
      return JSON.stringify(readmeFlags) === JSON.stringify(flags) ? [] : [`${name}: README ${readmeFlags.join(' ') || '(none)'}; program ${flags.join(' ') || '(none)'}`];
    });
    expect(differences).toEqual([]);
  });
});

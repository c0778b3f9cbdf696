import { CommanderError, type Command } from 'commander';
import { describe, expect, it } from 'vitest';
import { buildProgram } from './program.js';

function program(): Command {
  return buildProgram({ stdout: { write: () => true }, stderr: { write: () => true }, signal: new AbortController().signal, onRenderer: () => {} });
}

/** The command and every subcommand below it. */
function allCommands(command: Command): Command[] {
  return [command, ...command.commands.flatMap(allCommands)];
}

describe('help text', () => {
  it('breaks a description only between sentences (commander wraps each line and keeps the breaks)', () => {
    for (const command of allCommands(program())) {
      for (const line of command.description().split('\n').slice(0, -1)) {
        // An empty line separates paragraphs; any other line must end its sentence.
        if (line !== '') expect(line, `description of ${command.name()}`).toMatch(/[.:!?]$/);
      }
    }
  });

  it('wraps the program description at the terminal width without cutting a sentence in two', () => {
    const root = program();
    root.configureOutput({ getOutHelpWidth: () => 80 });
    const help = root.helpInformation();
    const description = help.slice(help.indexOf('\n\n') + 2, help.indexOf('\n\nOptions:'));
    expect(description.split('\n').every((line) => line.length <= 80)).toBe(true);
    // Joined back, the wrapped lines are the written paragraphs.
    const paragraphs = description.split('\n\n').map((p) => p.replace(/\n/g, ' '));
    expect(paragraphs).toEqual(root.description().split('\n\n'));
  });
});

/** The names from the program down to each command that has no subcommands, e.g. ['destroy', 'cluster']. */
function leafPaths(command: Command, path: string[] = []): string[][] {
  if (command.commands.length === 0) return [path];
  return command.commands.flatMap((c) => leafPaths(c, [...path, c.name()]));
}

describe('usage errors', () => {
  it('reach main.ts as a CommanderError from every subcommand (exit 2 there), never a process.exit inside commander', async () => {
    const paths = leafPaths(program());
    expect(paths).toContainEqual(['destroy', 'cluster']);
    for (const path of paths) {
      const root = program();
      for (const c of allCommands(root)) c.configureOutput({ writeErr: () => {}, writeOut: () => {} });
      await expect(root.parseAsync(['node', 'provisioner', ...path, '--no-such-flag']), path.join(' ')).rejects.toBeInstanceOf(CommanderError);
    }
  });
});

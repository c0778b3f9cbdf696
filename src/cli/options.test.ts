import { Command } from 'commander';
import { afterEach, describe, expect, it } from 'vitest';
import { noProgressTimeoutOption } from './options.js';

function parse(args: string[]): Record<string, unknown> {
  const command = new Command().exitOverride().configureOutput({ writeErr: () => {} }).addOption(noProgressTimeoutOption());
  command.parse(['node', 'provisioner', ...args]);
  return command.opts();
}

describe('--no-progress-timeout', () => {
  afterEach(() => {
    delete process.env.PROVISIONER_NO_PROGRESS_TIMEOUT;
  });

  it('is read as noProgressTimeout, in minutes (commander would take the --no- prefix for a negation of --progress-timeout)', () => {
    const options = parse(['--no-progress-timeout', '1']);
    expect(options.noProgressTimeout).toBe(1);
    expect(options).not.toHaveProperty('progressTimeout');
  });

  it('is absent when not given, so the wait keeps its default', () => {
    expect(parse([])).toEqual({});
  });

  it('comes from PROVISIONER_NO_PROGRESS_TIMEOUT', () => {
    process.env.PROVISIONER_NO_PROGRESS_TIMEOUT = '2.5';
    expect(parse([]).noProgressTimeout).toBe(2.5);
  });

  it('refuses what is not a positive number of minutes', () => {
    expect(() => parse(['--no-progress-timeout', '0'])).toThrow(/greater than 0/);
  });
});

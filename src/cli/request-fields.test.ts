/**
 * Services name request fields, the CLI names flags: a failure and a logged message show the
 * flag the user typed, through the one mapping; and no service spells a flag of its own.
 */
import { readFileSync, readdirSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { UsageError, requestField } from '../errors.js';
import { log } from '../events.js';
import { RecordingSink } from '../../test/support/recording-sink.js';
import { checkKubeconfigFile } from '../kube/kubeconfig-file.js';
import { checkListenAddress } from '../management/attach.js';
import { flagOfRequestField, sinkWithFlagNames, withFlagNames } from './request-fields.js';

describe('request fields shown as flags', () => {
  it('names the flag in the message and hint of a failure a service raised about a request field', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'fields-'));
    try {
      const missing = path.join(dir, 'nope.kubeconfig');
      const error = withFlagNames(await checkKubeconfigFile(missing, requestField('managementKubeconfig')).then(() => undefined, (e: unknown) => e));
      expect(error).toBeInstanceOf(UsageError);
      expect((error as UsageError).message).toBe(`${missing} (given by --management-kubeconfig) does not exist`);
      expect((error as UsageError).hint).toContain('with --management-kubeconfig');
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
    let refused: unknown;
    try {
      checkListenAddress('8.8.8.8', { flag: requestField('listenAddress') });
    } catch (error) {
      refused = withFlagNames(error);
    }
    expect((refused as UsageError).message).toMatch(/^--listen-address 8\.8\.8\.8: /);
    expect((refused as UsageError).exitCode).toBe('usage');
  });

  it('names the flag in the events a command prints', () => {
    const recorded = new RecordingSink();
    log(sinkWithFlagNames(recorded), 'info', `from ${requestField('apiServerUrl')} and ${requestField('pivotTo')} self`);
    expect(recorded.ofType('log').map((l) => l.message)).toEqual(['from --api-server-url and --pivot-to self']);
  });

  it('leaves no flag of the mapping spelled in a service (but in a quoted command line)', () => {
    const services = new URL('../services/', import.meta.url);
    const flags = Object.values(flagOfRequestField).filter((flag) => flag.length > '--mode'.length && flag !== '--kubeconfig');
    const offenders: string[] = [];
    for (const file of readdirSync(services).filter((f) => f.endsWith('.ts') && !f.endsWith('.test.ts'))) {
      const code = readFileSync(new URL(file, services), 'utf8')
        .split('\n')
        .filter((line) => !/^\s*(\/\/|\/\*|\*)/.test(line))
        .join('\n')
        // A whole command line quoted as the next step is another command's usage, not this request's flag.
        .replace(/\\?`provisioner [^`]*\\?`/g, '');
      if (code.includes("'--")) offenders.push(`${file}: '--`);
      for (const flag of flags) if (code.includes(flag)) offenders.push(`${file}: ${flag}`);
    }
    expect(offenders).toEqual([]);
  });
});

import { expect } from 'vitest';
import { processStartTime } from '../../src/process/proc.js';

/**
 * Expects `pid` to run nothing any more: gone, or a zombie until whoever inherited it reaps it.
 * A SIGKILLed process closes its files (an output pipe a caller waits on) a moment before the
 * kernel marks it a zombie, so on a busy machine it may still read as running just after the
 * code under test returns: poll for up to 2 s.
 */
export async function expectGone(pid: number): Promise<void> {
  await expect.poll(() => processStartTime(pid), { timeout: 2_000, interval: 20 }).toBeUndefined();
}

import { describe, expect, it } from 'vitest';
import { ExternalError, InterruptedError, UsageError } from '../errors.js';
import { asMoveBackError } from './back.js';

describe('asMoveBackError', () => {
  const dir = '/srv/clusters/a';

  it('replaces a hint that names pivot or --rollback with rerunning destroy cluster, which resumes', () => {
    for (const error of [
      new InterruptedError('The pivot was interrupted before copied', { hint: 'Run `provisioner pivot` again to resume it, or with --rollback to undo it.' }),
      new ExternalError('The pivot failed: boom', { hint: 'Run the same command again to resume from where it stopped, or `provisioner pivot --rollback` to undo it; the journal is in .provisioner/pivot.json.' }),
      new ExternalError('no hint'),
    ]) {
      const out = asMoveBackError(error, dir);
      expect(out).toBe(error);
      expect(error.exitCode).not.toBe('usage');
      expect(error.hint).toMatch(/^Run `provisioner destroy cluster --dir \/srv\/clusters\/a` again: it resumes the move back/);
      expect(error.hint).not.toMatch(/rollback|provisioner pivot/);
    }
  });

  it('keeps a specific next step and adds the rerun after it', () => {
    const error = new ExternalError('A Cluster clashes in the target', { hint: 'Move it out of the way in the target.' });
    asMoveBackError(error, dir);
    expect(error.hint).toBe('Move it out of the way in the target; then run `provisioner destroy cluster --dir /srv/clusters/a` again: it resumes the move back from where it stopped (the journal is in .provisioner/pivot.json), then deletes the cluster.');
  });

  it('leaves a hint that already says to run destroy cluster, and anything that is not ours', () => {
    const error = new UsageError('pods did not stop', { hint: 'Look at those pods, then run destroy cluster again.' });
    asMoveBackError(error, dir);
    expect(error.hint).toBe('Look at those pods, then run destroy cluster again.');
    const plain = new Error('x');
    expect(asMoveBackError(plain, dir)).toBe(plain);
  });
});

/**
 * The processes of integration/pivot-self.test.ts that must not be the test's own:
 * - `start <dir>`: the install's local control plane, detached (as create cluster leaves an
 *   in-memory install's), with Cluster API's and the agent's managers; this process then exits,
 *   so nothing watches or restarts its processes but the commands that adopt it.
 * - `pivot <dir>` with PIVOT_KILL_AFTER=<phase>: `pivot --to self`'s move into `D/auth/kubeconfig`
 *   (services/pivot.ts, what `pivotToSelf` runs once the providers are installed), which SIGKILLs
 *   its own process right after the journal records that phase: a real kill at a chosen point.
 *   Its log lines go to stderr (the test reads where a resumed run resumed from).
 */
import type { EventSink } from '../../../src/events.js';
import { RecordingSink } from '../../support/recording-sink.js';
import { prepareLocalControlPlane } from '../../../src/management/attach.js';
import { pivotTargetKubeconfig, selfTarget } from '../../../src/pivot/target.js';
import { allControllers } from '../../../src/platforms/index.js';
import { pivot } from '../../../src/services/pivot.js';

/** Cluster API's core, kubeadm and in-memory providers (the seeded kinds) and our agent manager. */
export const pivotSelfControllers = allControllers().filter((c) => c.binary === 'capi-manager');

// Run as a script only (the test imports pivotSelfControllers from here).
const [mode, dir] = process.argv[1]?.endsWith('pivot-self-child.ts') ? process.argv.slice(2) : [];
if (mode === 'start' && dir) {
  const local = await prepareLocalControlPlane({ dir, detached: true, sink: new RecordingSink(), signal: new AbortController().signal, controllers: pivotSelfControllers });
  await local.start();
  process.exit(0);
} else if (mode === 'pivot' && dir) {
  const killAfter = process.env['PIVOT_KILL_AFTER'];
  const logToStderr: EventSink = {
    emit(event) {
      if (event.type === 'log') process.stderr.write(`${event.message}\n`);
    },
  };
  await pivot({
    dir,
    toKubeconfig: pivotTargetKubeconfig(dir, selfTarget),
    sink: logToStderr,
    signal: new AbortController().signal,
    afterPhase: (phase) => {
      if (phase !== killAfter) return;
      process.stderr.write(`killed after ${phase}\n`);
      process.kill(process.pid, 'SIGKILL');
    },
  });
  process.stderr.write('the pivot ended without reaching its kill point\n');
  process.exit(3);
} else if (mode !== undefined) {
  process.stderr.write('usage: pivot-self-child.ts start <dir> | PIVOT_KILL_AFTER=<phase> pivot-self-child.ts pivot <dir>\n');
  process.exit(2);
}

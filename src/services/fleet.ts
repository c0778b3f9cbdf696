/**
 * `register fleet`: hands the install's workload cluster to a Fleet manager
 * (src/handoff/fleet/register.ts does the work, under this command's directory lock).
 */
import path from 'node:path';
import { UsageError, requestField } from '../errors.js';
import { defaultRegistrationMode, registerFleetLocked, type FleetRegistrationResult, type RegisterFleetRequest } from '../handoff/fleet/register.js';
import { acquireDirLock } from '../process/lock.js';

export { defaultFleetNamespace, fleetRecordFile, type FleetRegistrationResult, type RegisterFleetRequest, type RegistrationMode } from '../handoff/fleet/register.js';

export async function registerFleet(request: RegisterFleetRequest): Promise<FleetRegistrationResult> {
  const dir = path.resolve(request.dir);
  if (request.apiServerUrl && (request.mode ?? defaultRegistrationMode) !== 'agent') {
    throw new UsageError(`${requestField('apiServerUrl')} is what a Fleet agent registering by itself is told: it applies to ${requestField('mode')} agent only`, { hint: `Drop it, or add ${requestField('mode')} agent.` });
  }
  const lock = await acquireDirLock(dir, { command: 'register fleet', events: request.sink });
  try {
    return await registerFleetLocked(request);
  } finally {
    await lock.release();
  }
}

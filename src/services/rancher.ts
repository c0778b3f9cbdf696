/**
 * `register rancher` and `import --to rancher` (src/handoff/rancher/register.ts does the work):
 * hands the install's cluster, or any cluster, to Rancher the way Rancher Turtles would.
 */
import path from 'node:path';
import { requestField } from '../errors.js';
import { registerRancherLocked, type RancherRegistrationResult, type RegisterRancherRequest } from '../handoff/rancher/register.js';
import { checkKubeconfigFile } from '../kube/kubeconfig-file.js';
import { acquireDirLock } from '../process/lock.js';

export { importToRancher, type ImportToRancherRequest, type RancherRegistrationResult, type RancherStrategy, type RegisterRancherRequest } from '../handoff/rancher/register.js';

/** `provisioner register rancher`: takes the install directory's lock, then registerRancherLocked. */
export async function registerRancher(request: RegisterRancherRequest): Promise<RancherRegistrationResult> {
  const dir = path.resolve(request.dir);
  await checkKubeconfigFile(path.resolve(request.rancherKubeconfig), requestField('rancherKubeconfig'));
  const lock = await acquireDirLock(dir, { command: 'register rancher', events: request.sink });
  try {
    return await registerRancherLocked({ ...request, dir });
  } finally {
    await lock.release();
  }
}

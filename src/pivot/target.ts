/**
 * What a pivot target names: `self` (`--to self`, `--pivot-to self`) is the install's own
 * cluster, reached through `D/auth/kubeconfig`; anything else is a kubeconfig file. create
 * cluster, destroy and the self pivot's data removal compare against the same path.
 */
import path from 'node:path';

/** `--to self` / `--pivot-to self`: the install's own cluster as the target. */
export const selfTarget = 'self';

/** The kubeconfig a pivot target names: `self` is the install's own cluster (`D/auth/kubeconfig`), anything else a kubeconfig file. */
export function pivotTargetKubeconfig(dir: string, target: string): string {
  return target === selfTarget ? path.join(path.resolve(dir), 'auth', 'kubeconfig') : path.resolve(target);
}

/** Whether `kubeconfig` (a recorded management cluster or a pivot's target) is the install's own cluster. */
export function isSelfManaged(dir: string, kubeconfig: string): boolean {
  return path.resolve(kubeconfig) === pivotTargetKubeconfig(dir, selfTarget);
}

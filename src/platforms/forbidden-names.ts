/**
 * What names a platform, taken from the registry, for the lint rule that keeps every
 * platform inside its folder (scripts/lint/no-platform-names.js, set up in eslint.config.js):
 * no source file under src/ outside src/platforms/, tests excepted, names a platform.
 *
 * Derived from the registry, so a new platform is checked as soon as it is listed: its name
 * and its controllers' short names (`capd`) as words of any case (`isInmemory`,
 * `PROVISIONER_INMEMORY_…` and `'aws'` all count), and its kinds, provider names, binaries
 * and namespaces as they are written (`DevMachineTemplate` contains `DevMachine`).
 */
import { coreControllers, sharedControllers } from './platform.js';
import { platforms } from './registry.js';

export interface ForbiddenPlatformNames {
  /** Matched as whole words (split at camelCase humps too), any case; lower case here. */
  words: string[];
  /** Matched as written, anywhere. */
  names: string[];
}

/**
 * Platform names that are also the product's words for something every platform has,
 * allowed everywhere: `hosts` is the `provisioner hosts` command group and the node
 * agent's inventory, which any management cluster serves. The platform's kinds, provider
 * and namespaces stay forbidden.
 */
export const sharedPlatformWords: Readonly<Record<string, string>> = {
  hosts: 'the `provisioner hosts` commands and the node agent serve every platform',
};

export function forbiddenPlatformNames(): ForbiddenPlatformNames {
  // Core controllers run on every platform; shared ones serve features outside platforms too.
  const onEveryPlatform = new Set([...coreControllers(), ...sharedControllers()].map((c) => c.binary));
  const words = new Set<string>();
  const names = new Set<string>();
  for (const platform of platforms) {
    if (!(platform.name.toLowerCase() in sharedPlatformWords)) words.add(platform.name.toLowerCase());
    const kinds = [
      platform.infrastructure.clusterKind,
      platform.infrastructure.machineTemplateKind,
      ...(platform.clusterClass ? [platform.clusterClass.clusterTemplateKind] : []),
      ...platform.prunableKinds.map((k) => k.kind),
      ...platform.lifecycle.stateKinds.map((k) => k.kind),
    ];
    for (const kind of kinds) names.add(kind);
    for (const controller of platform.controllers.filter((c) => !onEveryPlatform.has(c.binary))) {
      names.add(controller.binary);
      names.add(controller.provider);
      words.add(controller.binary.split('-')[0]!.toLowerCase());
    }
    for (const namespace of platform.installConfig.providerNamespaces) names.add(namespace);
  }
  return { words: [...words].sort(), names: [...names].sort() };
}

/** The platforms, by name. */
import { platformOf, type InstallConfig, type PlatformName, type Rule } from '../config/index.js';
import { awsPlatform } from './aws/index.js';
import { inMemoryPlatform } from './inmemory/index.js';
import type { Platform } from './platform.js';

export const platforms: Readonly<Record<PlatformName, Platform>> = {
  inmemory: inMemoryPlatform,
  aws: awsPlatform,
};

/** The platform the config's `platform` section names. */
export function platformFor(config: InstallConfig): Platform {
  return platforms[platformOf(config)];
}

/** Every platform's rules: each checks only its own section, so all can run on any config. */
export function allPlatformRules(): Rule[] {
  return Object.values(platforms).flatMap((p) => [...p.rules]);
}

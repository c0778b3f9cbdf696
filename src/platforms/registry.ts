/**
 * The platforms. Adding one: write its folder (src/platforms/<name>/, implementing
 * Platform) and list it here; the install-config schema, `explain`, the flags and prompt
 * of `create install-config`, manifests and `create cluster` all take it from this list.
 */
import { bundledCniRefused, composeInstallConfigSchema, platformNameOf, topologyLayoutRefused, type CniChoice, type InstallConfig, type InstallConfigSchema, type PlatformConfigSection, type Rule } from '../config/index.js';
import { UsageError } from '../errors.js';
import { awsPlatform } from './aws/index.js';
import { hostsPlatform } from './hosts/index.js';
import { inMemoryPlatform } from './inmemory/index.js';
import { vspherePlatform } from './vsphere/index.js';
import { corePrunableKinds, type ControllerRequirement, type KindRef, type Platform, type PlatformInput } from './platform.js';

/** Every platform, the default (a config without a `platform` section, `--platform` unset) first. */
export const platforms: readonly Platform[] = [inMemoryPlatform, awsPlatform, vspherePlatform, hostsPlatform];

/** The platform of a config that names none. */
export const defaultPlatform: Platform = platforms[0]!;

/** A platform's install-config section, refusing `manifests.layout: topology` when the platform has no ClusterClass layout. */
export function configSectionOf(platform: Platform): PlatformConfigSection {
  const refusals: Rule[] = [...(platform.clusterClass ? [] : [topologyLayoutRefused(platform.name)]), ...(platform.bundledAddons ? [] : [bundledCniRefused(platform.name)])];
  if (refusals.length === 0) return platform.installConfig;
  return { ...platform.installConfig, rules: [...platform.installConfig.rules, ...refusals] };
}

/** The pod network a (validated) config gets: networking.cni, else flannel where the platform carries the bundled add-ons, none elsewhere. */
export function effectiveCni(config: InstallConfig): CniChoice {
  return config.networking.cni ?? (platformFor(config).bundledAddons ? 'flannel' : 'none');
}

/** The install config's schema with every platform's sections: what validation, the JSON Schema and `explain` use. */
export const installConfigSchema: InstallConfigSchema = composeInstallConfigSchema(platforms.map(configSectionOf), defaultPlatform.name);

const byName = new Map(platforms.map((p) => [p.name, p]));

/** The platform called `name`; a UsageError naming the known ones otherwise. */
export function platformNamed(name: string): Platform {
  const platform = byName.get(name);
  if (!platform) throw new UsageError(`unknown platform ${JSON.stringify(name)}`, { hint: `use one of: ${platformNames().join(', ')}` });
  return platform;
}

export function platformNames(): string[] {
  return platforms.map((p) => p.name);
}

/** The platform the (validated) config's `platform` section names. */
export function platformFor(config: InstallConfig): Platform {
  return platformNamed(platformNameOf(config));
}

/**
 * The platform an install-config document names, read without validating it (a command
 * that must not fail on a config edited since the cluster was made); undefined when it
 * names several or none it knows, or is no document at all (a config without a `platform`
 * section names the default platform).
 */
export function platformOfDocument(document: unknown): Platform | undefined {
  if (typeof document !== 'object' || document === null) return undefined;
  const section = (document as { platform?: unknown }).platform;
  if (section === undefined || section === null) return defaultPlatform;
  if (typeof section !== 'object') return undefined;
  const named = Object.keys(section).filter((key) => byName.has(key));
  return named.length === 1 ? byName.get(named[0]!) : undefined;
}

/** Kinds apply may prune on this platform: the core ones and the platform's templates. */
export function prunableKinds(platform: Platform): KindRef[] {
  return [...corePrunableKinds, ...platform.prunableKinds];
}

/** The inputs of every platform, each key once (platforms sharing an input share its flag), in registration order. */
export function allPlatformInputs(): { input: PlatformInput; platforms: string[] }[] {
  const inputs = new Map<string, { input: PlatformInput; platforms: string[] }>();
  for (const platform of platforms) {
    for (const input of platform.inputs) {
      const seen = inputs.get(input.key);
      if (seen) seen.platforms.push(platform.name);
      else inputs.set(input.key, { input, platforms: [platform.name] });
    }
  }
  return [...inputs.values()];
}

/**
 * Every platform's controller requirements, one per provider (the first platform's settings
 * win where two declare the same core provider): what `management start`, which runs every
 * bundled provider, starts each with. Providers served by one binary share its process.
 */
export function allControllers(): ControllerRequirement[] {
  const byProvider = new Map<string, ControllerRequirement>();
  for (const platform of platforms) {
    for (const requirement of platform.controllers) if (!byProvider.has(requirement.provider)) byProvider.set(requirement.provider, requirement);
  }
  return [...byProvider.values()];
}

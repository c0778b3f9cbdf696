/**
 * What a platform contributes to the install config, and how config uses it without
 * knowing any platform: config declares this interface and validates the common part of
 * the document; each platform implements it in src/platforms/<name>/ for its own
 * `platform.<name>` and `machinePools[].platform.<name>` sections; the platform registry
 * composes them into one schema (`composeInstallConfigSchema`), which every validation,
 * the JSON Schema and `explain` take as an argument. So config never imports a platform.
 */
import type { InstallConfig } from './install-config.js';
import type { Rule } from './rules.js';
import type { Infer, ObjectNode, SchemaProblem } from './schema.js';

/** A loosely typed document part: defaults run before the whole document is known to be valid. */
export type Loose = Record<string, unknown>;

export interface PlatformConfigSection {
  /** The key under `platform` (and under each pool's `platform`), e.g. the platform's name. */
  readonly name: string;
  /** The cluster-wide section, `platform.<name>`: schema, defaults, and `explain` text in one declaration. */
  readonly schema: ObjectNode;
  /** A pool's machine settings, `machinePools[].platform.<name>`. */
  readonly machineSchema: ObjectNode;
  /**
   * Fills a pool's computed machine settings (the schema's own defaults are already in),
   * e.g. from the cluster-wide section or the pool's roles. It runs on a document that may
   * still hold schema problems elsewhere, so it reads defensively. Default: nothing to fill.
   */
  machineDefaults?(machine: Loose, context: { section: Loose; roles: readonly unknown[] }): void;
  /** Cross-field checks of the platform's sections; run only when the config names this platform. */
  readonly rules: readonly Rule[];
  /** Namespaces the platform's providers own: generated objects never go there. */
  readonly providerNamespaces: readonly string[];
  /**
   * Checks of the files the section references (a credentials file exists, is private),
   * when a config is loaded from an install directory. Paths are document paths.
   * Default: nothing to check.
   */
  checkFiles?(config: InstallConfig, dir: string): Promise<{ errors: SchemaProblem[]; warnings: SchemaProblem[] }>;
}

/** The install config's schema with the registered platforms' sections in place. */
export interface InstallConfigSchema {
  /** The whole document's schema: validation, the JSON Schema and `explain` read it. */
  readonly root: ObjectNode;
  /** The platforms, by name, in registration order. */
  readonly platforms: ReadonlyMap<string, PlatformConfigSection>;
  /** The platform of a config without a `platform` section. */
  readonly defaultPlatform: string;
}

/** The section of `platform.<name>` in a validated config, typed by its schema; undefined when another platform is set. */
export function platformSection<N extends ObjectNode>(config: InstallConfig, section: { name: string; schema: N }): Infer<N> | undefined {
  // Validation checked the section against `section.schema`, so the cast states what is true.
  return config.platform[section.name] as Infer<N> | undefined;
}

/** A pool's `platform.<name>` machine settings, typed by the platform's machine schema. */
export function machineSection<N extends ObjectNode>(pool: InstallConfig['machinePools'][number], section: { name: string; machineSchema: N }): Infer<N> | undefined {
  return pool.platform[section.name] as Infer<N> | undefined;
}

/** The platform a validated config names: the one key set under `platform`. */
export function platformNameOf(config: Pick<InstallConfig, 'platform'>): string {
  const name = Object.keys(config.platform).find((key) => config.platform[key] !== undefined);
  if (name === undefined) throw new Error('the install config names no platform; validation should have caught this');
  return name;
}

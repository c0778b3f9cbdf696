/** Platforms and the manifest generator. */
export { platforms, platformFor, allPlatformRules } from './registry.js';
export type { Platform, ControllerRequirement, ControllerBinary, CredentialFileReference, TemplateRole } from './platform.js';
export { generateManifests, canonicalJson, poolFileName, fixedFileNames, type GeneratedManifest, type ManifestSet, type ManifestObject, type ManifestRole } from './generate.js';
export * from './types.js';

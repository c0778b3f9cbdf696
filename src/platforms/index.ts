/** Platforms and the manifest generator. */
export { platforms, defaultPlatform, installConfigSchema, platformNamed, platformNames, platformFor, platformOfDocument, prunableKinds, allPlatformInputs, allControllers, effectiveCni } from './registry.js';
export { platformControllers, sharedControllers } from './platform.js';
export type { Platform, ControllerRequirement, ControllerBinary, CredentialFileReference, TemplateRole, KindRef, PlatformInput, PlatformLifecycle, PlatformHooks, PlatformHookContext, PlatformDestroyContext, ProviderObject, ReleasedObject, ServedArtifact } from './platform.js';
export { generateManifests, type GeneratedManifest, type ManifestSet, type ManifestObject, type ManifestRole } from './generate.js';
export * from './types.js';

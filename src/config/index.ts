/** The install config: schema, types, defaults, validation, explain. Platforms plug their sections in through ./platform-section.ts. */
export * from './install-config.js';
export * from './kubernetes-versions.js';
export { withDefaults, newInstallConfigDocument, type NewInstallConfigAnswers } from './defaults.js';
export { loadInstallConfigText, validateInstallConfigText, validateInstallConfigDocument, resolveConfigPath, type LoadOptions, type ValidateOptions, type ValidatedInstallConfig } from './load.js';
export { installConfigRules, namespaceNotReserved, reservedNamespaces, soundPools, topologyLayoutRefused, bundledCniRefused, type Rule, type RuleReport } from './rules.js';
export { machineSection, platformNameOf, platformSection, type InstallConfigSchema, type Loose, type PlatformConfigSection } from './platform-section.js';
export { computed, defaulted, formatPath, optional, required, s, toJsonSchema, type Infer, type ObjectNode, type PathSegment } from './schema.js';
export { parseCidr, cidrsOverlap, type Cidr } from './cidr.js';
export * from './ownership.js';
export { lookupField, renderExplain, splitExplainPath, type ExplainTarget } from './explain.js';
export { validateNode, type SchemaNode, type SchemaProblem } from './schema.js';
export { checkQualifiedName, durationToMs, labelValuePattern } from './names.js';

/** The install config: schema, types, defaults, validation, explain. */
export * from './install-config.js';
export * from './kubernetes-versions.js';
export { withDefaults, newInstallConfigDocument, awsControlPlaneInstanceProfile, awsNodeInstanceProfile, type NewInstallConfigAnswers } from './defaults.js';
export { loadInstallConfigText, validateInstallConfigText, validateInstallConfigDocument, resolveConfigPath, type LoadOptions, type ValidateOptions, type ValidatedInstallConfig } from './load.js';
export { installConfigRules, reservedNamespaces, soundPools, type Rule, type RuleReport } from './rules.js';
export { formatPath, toJsonSchema, type PathSegment } from './schema.js';
export { parseCidr, cidrsOverlap, type Cidr } from './cidr.js';
export * from './ownership.js';
export { lookupField, renderExplain, splitExplainPath, typeLabel, type ExplainTarget } from './explain.js';
export { validateNode, type SchemaNode, type SchemaProblem } from './schema.js';

/** The asset graph: assets, the store that reconciles them with the disk, and the install's assets. */
export type { Asset, AssetContext, AssetFile, Generated, Parents } from './asset.js';
export { AssetStore, type CommitReport, type FileAction, type FilePlan, type StoreOptions } from './store.js';
export { readState, statePath, type StateFile } from './state.js';
export { sha256, readAssetFile } from './files.js';
export { installConfigAsset, loadInstallConfig, readInstallConfig, readInstallConfigOrProblem, type InstallConfigRead, newInstallConfigAsset, renderNewInstallConfig, installConfigJsonSchema, schemaCopyPath, type LoadedInstallConfig } from './install-config.js';
export { clusterApiManifestsAsset, manifestsDirName, parseManifestFile, serializeManifest, type ClusterApiManifests, type ManifestFile, type ManifestOrigin } from './manifests.js';
export { diffObjects, objectKey, type DiffLabels, type LiveObjectSource, type LocatedObject, type ObjectChange, type ObjectChangeKind } from './object-diff.js';
export { unifiedDiff } from './line-diff.js';

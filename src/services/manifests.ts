/**
 * `provisioner create manifests`: generates the install's manifests through the asset store,
 * user edits kept (src/assets/create-manifests.ts; create cluster's first stage runs the same).
 */
export { createManifests, type CreateManifestsOptions, type CreateManifestsResult } from '../assets/create-manifests.js';

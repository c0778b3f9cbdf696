/**
 * Desired-set ownership, as wrangler's apply records it (Rancher's apply): every
 * generated object carries the set id and its owner in annotations, and a hash of
 * both in a label, so a later apply can list the set with one label selector and
 * prune the objects a new generation no longer contains. The keys are wrangler's,
 * exactly, so Rancher tooling reads our sets too. The apply engine imports these.
 */
import { createHash } from 'node:crypto';
import { installConfigApiVersion, installConfigKind, type InstallConfig } from './install-config.js';

/** Annotation: the desired set's id. */
export const objectSetIdKey = 'objectset.rio.cattle.io/id';
/** Annotation and label: sha1 of id, owner gvk, owner name and owner namespace (wrangler's objectSetHash). */
export const objectSetHashKey = 'objectset.rio.cattle.io/hash';
/** Annotation: the owner's group/version and kind, as Go prints a GroupVersionKind. */
export const objectSetOwnerGvkKey = 'objectset.rio.cattle.io/owner-gvk';
export const objectSetOwnerNameKey = 'objectset.rio.cattle.io/owner-name';
export const objectSetOwnerNamespaceKey = 'objectset.rio.cattle.io/owner-namespace';

/** Our set id: everything generated from one install config. */
const provisionerSetId = 'provisioner-cluster';

export interface DesiredSetOwner {
  setId: string;
  /** `group/version, Kind=Kind`, as Go's schema.GroupVersionKind.String() prints it. */
  ownerGvk: string;
  ownerName: string;
  ownerNamespace: string;
}

export interface OwnershipMetadata {
  annotations: Record<string, string>;
  labels: Record<string, string>;
}

/** The owner of every object generated from `config`: the install config itself. */
export function installConfigOwner(config: Pick<InstallConfig, 'metadata'>): DesiredSetOwner {
  return {
    setId: provisionerSetId,
    ownerGvk: `${installConfigApiVersion}, Kind=${installConfigKind}`,
    ownerName: config.metadata.name,
    ownerNamespace: config.metadata.namespace,
  };
}

/** wrangler's objectSetHash: sha1 over id, gvk, name, namespace, concatenated in that order. */
export function objectSetHash(owner: DesiredSetOwner): string {
  return createHash('sha1').update(owner.setId).update(owner.ownerGvk).update(owner.ownerName).update(owner.ownerNamespace).digest('hex');
}

/** The annotations and label every object of the set carries. */
export function ownershipMetadata(owner: DesiredSetOwner): OwnershipMetadata {
  const hash = objectSetHash(owner);
  return {
    annotations: {
      [objectSetIdKey]: owner.setId,
      [objectSetHashKey]: hash,
      [objectSetOwnerGvkKey]: owner.ownerGvk,
      [objectSetOwnerNameKey]: owner.ownerName,
      [objectSetOwnerNamespaceKey]: owner.ownerNamespace,
    },
    labels: { [objectSetHashKey]: hash },
  };
}

/** The label selector (`key=value`) that lists every object of the set. */
export function desiredSetSelector(owner: DesiredSetOwner): string {
  return `${objectSetHashKey}=${objectSetHash(owner)}`;
}

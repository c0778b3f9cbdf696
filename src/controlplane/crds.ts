/**
 * What the local API server is given of each provider CRD. The API server keeps each
 * version of each CRD in several forms (the stored object, its informers and watch
 * cache, the structural schema, the validators, the OpenAPI models); etcd stores it too.
 * Two things nothing here reads are left out at install time (docs/architecture.md,
 * "Footprint"):
 *  - the API documentation in every schema node (`description`), about two thirds of the
 *    providers' 4 MB, which only `kubectl explain` shows: 86 MB less kube-apiserver and
 *    19 MB less etcd resident memory on `management start`;
 *  - every version but the storage one (Cluster API's deprecated v1beta1, which upstream
 *    stops serving in v1.16): every bundled controller, clusterctl's move and our pivot use
 *    the storage version, so the conversion webhooks have nothing left to convert. About
 *    60 MB less on the in-memory platform's control plane, and half the API server's boot CPU.
 * Validation, defaulting and CEL rules of the version served are untouched.
 */
import type { KubeObject } from '../kube/client.js';

/** JSON Schema keywords whose value is a map of field name → schema (a field may be called `description`). */
const schemaMaps = new Set(['properties', 'patternProperties', 'definitions', 'dependencies']);

/** A copy of `schema` without any `description` keyword, at any depth; fields named `description` stay. */
export function withoutDescriptions(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(withoutDescriptions);
  if (typeof schema !== 'object' || schema === null) return schema;
  const copy: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(schema)) {
    if (key === 'description' && typeof value === 'string') continue;
    if (schemaMaps.has(key) && typeof value === 'object' && value !== null && !Array.isArray(value)) {
      copy[key] = Object.fromEntries(Object.entries(value).map(([field, fieldSchema]) => [field, withoutDescriptions(fieldSchema)]));
    } else {
      copy[key] = withoutDescriptions(value);
    }
  }
  return copy;
}

interface CrdVersion {
  name: string;
  storage?: boolean;
  schema?: { openAPIV3Schema?: unknown };
}

/**
 * The CRD as the local control plane installs it: its storage version only, with no
 * conversion (one version needs none), and that version's schema without descriptions.
 * A CRD that marks no storage version is left with all of them. Any other object is
 * returned unchanged.
 */
export function lightenCrd(obj: KubeObject): KubeObject {
  if (obj.kind !== 'CustomResourceDefinition') return obj;
  const spec = obj.spec as { versions?: CrdVersion[] } | undefined;
  if (!spec?.versions) return obj;
  const storage = spec.versions.filter((version) => version.storage === true);
  const versions = storage.length === 1 ? storage : spec.versions;
  return {
    ...obj,
    spec: {
      ...spec,
      ...(versions.length === 1 ? { conversion: { strategy: 'None' } } : {}),
      versions: versions.map((version) =>
        version.schema?.openAPIV3Schema === undefined ? version : { ...version, schema: { ...version.schema, openAPIV3Schema: withoutDescriptions(version.schema.openAPIV3Schema) } },
      ),
    },
  };
}

/**
 * What the local API server is given of each provider CRD. The providers' CRDs carry
 * their API documentation in every schema node (`description`), about two thirds of
 * their 4 MB, and the API server keeps each CRD in several forms (the stored object, its
 * informers and watch cache, the structural schema, the validators, the OpenAPI
 * models); etcd stores it too. Nothing here reads those texts but `kubectl explain`,
 * so they are dropped at install time: measured on `management start`, 86 MB less
 * kube-apiserver and 19 MB less etcd resident memory (docs/architecture.md, "Footprint").
 * Validation, defaulting, CEL rules, conversion and every served version are untouched.
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
  schema?: { openAPIV3Schema?: unknown };
}

/**
 * The CRD as the local control plane installs it: every version's schema without its
 * descriptions. Any other object is returned unchanged.
 */
export function lightenCrd(obj: KubeObject): KubeObject {
  if (obj.kind !== 'CustomResourceDefinition') return obj;
  const spec = obj.spec as { versions?: CrdVersion[] } | undefined;
  if (!spec?.versions) return obj;
  return {
    ...obj,
    spec: {
      ...spec,
      versions: spec.versions.map((version) =>
        version.schema?.openAPIV3Schema === undefined ? version : { ...version, schema: { ...version.schema, openAPIV3Schema: withoutDescriptions(version.schema.openAPIV3Schema) } },
      ),
    },
  };
}

/**
 * Checks objects against the structural schemas of the real CRDs (extracted into
 * test/fixtures/crd-schemas by scripts/schema/crd-fixtures.ts), as the API server's
 * schema validation and strict field validation would, plus the admission-webhook rules
 * of Cluster API that the manifests must satisfy. CEL rules (x-kubernetes-validations)
 * are not evaluated here: the server-side dry-run against a real control plane covers them.
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

interface OpenApiSchema {
  type?: string;
  properties?: Record<string, OpenApiSchema>;
  additionalProperties?: OpenApiSchema | boolean;
  items?: OpenApiSchema;
  required?: string[];
  enum?: unknown[];
  pattern?: string;
  minLength?: number;
  maxLength?: number;
  minimum?: number;
  maximum?: number;
  minItems?: number;
  maxItems?: number;
  minProperties?: number;
  maxProperties?: number;
  nullable?: boolean;
  format?: string;
  'x-kubernetes-int-or-string'?: boolean;
  'x-kubernetes-preserve-unknown-fields'?: boolean;
}

interface CrdFixture {
  group: string;
  version: string;
  kind: string;
  scope: 'Namespaced' | 'Cluster';
  schema: OpenApiSchema;
}

const fixtureDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../fixtures/crd-schemas');

let cache: Map<string, CrdFixture> | undefined;

function fixtures(): Map<string, CrdFixture> {
  if (!cache) {
    cache = new Map();
    for (const file of readdirSync(fixtureDir)) {
      const fixture = JSON.parse(readFileSync(path.join(fixtureDir, file), 'utf8')) as CrdFixture;
      cache.set(`${fixture.group}/${fixture.version}/${fixture.kind}`, fixture);
    }
  }
  return cache;
}

const dns1123Subdomain = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const labelValue = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function checkSchema(schema: OpenApiSchema, value: unknown, at: string, problems: string[]): void {
  if (value === null) {
    if (!schema.nullable) problems.push(`${at}: null is not allowed`);
    return;
  }
  if (schema['x-kubernetes-int-or-string']) {
    if (typeof value !== 'string' && !Number.isInteger(value)) problems.push(`${at}: must be an integer or a string`);
    return;
  }
  switch (schema.type) {
    case 'object': {
      if (!isRecord(value)) return void problems.push(`${at}: must be an object`);
      const keys = Object.keys(value);
      if (schema.minProperties !== undefined && keys.length < schema.minProperties) problems.push(`${at}: needs at least ${schema.minProperties} properties`);
      if (schema.maxProperties !== undefined && keys.length > schema.maxProperties) problems.push(`${at}: allows at most ${schema.maxProperties} properties`);
      for (const required of schema.required ?? []) if (!(required in value)) problems.push(`${at}.${required}: required`);
      for (const [key, child] of Object.entries(value)) {
        const sub = schema.properties?.[key] ?? (typeof schema.additionalProperties === 'object' ? schema.additionalProperties : undefined);
        if (!sub) {
          if (!schema['x-kubernetes-preserve-unknown-fields'] && schema.additionalProperties !== true) problems.push(`${at}.${key}: unknown field`);
          continue;
        }
        checkSchema(sub, child, `${at}.${key}`, problems);
      }
      return;
    }
    case 'array': {
      if (!Array.isArray(value)) return void problems.push(`${at}: must be an array`);
      // The CRDs' CEL rule on every extraArgs list: names are unique.
      if (/extraArgs$|ExtraArgs$/.test(at)) {
        const names = value.map((v) => (isRecord(v) ? v.name : undefined));
        if (new Set(names).size !== names.length) problems.push(`${at}: argument names must be unique`);
      }
      if (schema.minItems !== undefined && value.length < schema.minItems) problems.push(`${at}: needs at least ${schema.minItems} items`);
      if (schema.maxItems !== undefined && value.length > schema.maxItems) problems.push(`${at}: allows at most ${schema.maxItems} items`);
      if (schema.items) value.forEach((item, i) => checkSchema(schema.items!, item, `${at}[${i}]`, problems));
      return;
    }
    case 'string': {
      if (typeof value !== 'string') return void problems.push(`${at}: must be a string, got ${typeof value}`);
      if (schema.enum && !schema.enum.includes(value)) problems.push(`${at}: ${value} is not one of ${schema.enum.join(', ')}`);
      if (schema.minLength !== undefined && value.length < schema.minLength) problems.push(`${at}: shorter than ${schema.minLength}`);
      if (schema.maxLength !== undefined && value.length > schema.maxLength) problems.push(`${at}: longer than ${schema.maxLength}`);
      if (schema.pattern && !new RegExp(schema.pattern).test(value)) problems.push(`${at}: ${value} does not match ${schema.pattern}`);
      return;
    }
    case 'integer':
    case 'number': {
      if (typeof value !== 'number' || (schema.type === 'integer' && !Number.isInteger(value))) return void problems.push(`${at}: must be ${schema.type}`);
      if (schema.minimum !== undefined && value < schema.minimum) problems.push(`${at}: below ${schema.minimum}`);
      if (schema.maximum !== undefined && value > schema.maximum) problems.push(`${at}: above ${schema.maximum}`);
      return;
    }
    case 'boolean':
      if (typeof value !== 'boolean') problems.push(`${at}: must be a boolean`);
      return;
    default:
      return;
  }
}

function checkMetadata(object: Record<string, unknown>, scope: 'Namespaced' | 'Cluster', problems: string[]): void {
  const metadata = object.metadata;
  if (!isRecord(metadata)) return void problems.push('metadata: required');
  const name = metadata.name;
  if (typeof name !== 'string' || name.length === 0 || name.length > 253 || !dns1123Subdomain.test(name)) problems.push(`metadata.name: ${String(name)} is not a DNS subdomain`);
  if (scope === 'Namespaced' && typeof metadata.namespace !== 'string') problems.push('metadata.namespace: required for a namespaced kind');
  if (scope === 'Cluster' && metadata.namespace !== undefined) problems.push('metadata.namespace: set on a cluster-scoped kind');
  for (const [key, value] of Object.entries((metadata.labels ?? {}) as Record<string, unknown>)) {
    if (typeof value !== 'string' || value.length > 63 || !labelValue.test(value)) problems.push(`metadata.labels[${key}]: invalid label value ${String(value)}`);
  }
  for (const [key, value] of Object.entries((metadata.annotations ?? {}) as Record<string, unknown>)) {
    if (typeof value !== 'string') problems.push(`metadata.annotations[${key}]: must be a string`);
  }
}

/** Cluster API admission-webhook rules the generated objects must satisfy (v1.14.2 webhooks). */
function checkWebhookRules(object: Record<string, unknown>, problems: string[]): void {
  const kind = object.kind;
  const metadata = object.metadata as Record<string, unknown>;
  const spec = (object.spec ?? {}) as Record<string, unknown>;
  const name = String(metadata.name);
  if (kind === 'Cluster' || kind === 'MachineDeployment') {
    if (name.length > 63 || !labelValue.test(name)) problems.push(`metadata.name: ${name} must be a valid label value (the ${kind} webhook)`);
  }
  if (kind === 'KubeadmControlPlane') {
    const replicas = spec.replicas;
    if (typeof replicas !== 'number' || replicas <= 0) problems.push('spec.replicas: must be positive (KCP webhook)');
    else if (replicas % 2 === 0) problems.push('spec.replicas: cannot be even with stacked etcd (KCP webhook)');
    if (!/^v\d+\.\d+\.\d+/.test(String(spec.version))) problems.push('spec.version: must be v-prefixed semver (KCP webhook)');
  }
  if (kind === 'MachineDeployment') {
    const selector = ((spec.selector ?? {}) as Record<string, unknown>).matchLabels as Record<string, string> | undefined;
    const template = (spec.template ?? {}) as Record<string, unknown>;
    const labels = ((template.metadata ?? {}) as Record<string, unknown>).labels as Record<string, string> | undefined;
    for (const [k, v] of Object.entries(selector ?? {})) if (labels?.[k] !== v) problems.push(`spec.template.metadata.labels: must match spec.selector (${k}=${v})`);
    const templateSpec = (template.spec ?? {}) as Record<string, unknown>;
    if (templateSpec.clusterName !== spec.clusterName) problems.push('spec.clusterName: must equal spec.template.spec.clusterName');
    if (!/^v\d+\.\d+\.\d+/.test(String(templateSpec.version))) problems.push('spec.template.spec.version: must be v-prefixed semver');
  }
}

/** Every problem of `object` against its CRD; an unknown kind is a problem too. */
export function validateAgainstCrd(object: Record<string, unknown>): string[] {
  const problems: string[] = [];
  const apiVersion = String(object.apiVersion);
  const kind = String(object.kind);
  if (apiVersion === 'v1' && kind === 'Namespace') {
    checkMetadata(object, 'Cluster', problems);
    return problems;
  }
  const fixture = fixtures().get(`${apiVersion}/${kind}`);
  if (!fixture) return [`no CRD fixture for ${apiVersion} ${kind}`];
  const { metadata: _metadata, ...rest } = object;
  const schema: OpenApiSchema = { ...fixture.schema, properties: { ...fixture.schema.properties, metadata: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true } } };
  checkSchema(schema, { ...rest, metadata: {} }, kind, problems);
  checkMetadata(object, fixture.scope, problems);
  checkWebhookRules(object, problems);
  return problems;
}

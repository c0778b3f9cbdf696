import { describe, expect, it } from 'vitest';
import type { KubeObject } from '../kube/client.js';
import { lightenCrd, withoutDescriptions } from './crds.js';

const schema = {
  description: 'Cluster is the Schema for the clusters API.',
  type: 'object',
  properties: {
    // A field called `description` is a field, not documentation: it stays.
    description: { description: 'A free-form text.', type: 'string', maxLength: 256 },
    spec: {
      description: 'spec is the desired state.',
      type: 'object',
      required: ['replicas'],
      'x-kubernetes-validations': [{ rule: 'self.replicas >= 0', message: 'replicas must not be negative' }],
      properties: {
        replicas: { description: 'How many.', type: 'integer', default: 1 },
        items: { type: 'array', items: { description: 'One item.', type: 'string', enum: ['a', 'b'] } },
        anyOf: { anyOf: [{ description: 'a number', type: 'integer' }, { type: 'string' }], 'x-kubernetes-int-or-string': true },
      },
    },
  },
};

const stripped = {
  type: 'object',
  properties: {
    description: { type: 'string', maxLength: 256 },
    spec: {
      type: 'object',
      required: ['replicas'],
      'x-kubernetes-validations': [{ rule: 'self.replicas >= 0', message: 'replicas must not be negative' }],
      properties: {
        replicas: { type: 'integer', default: 1 },
        items: { type: 'array', items: { type: 'string', enum: ['a', 'b'] } },
        anyOf: { anyOf: [{ type: 'integer' }, { type: 'string' }], 'x-kubernetes-int-or-string': true },
      },
    },
  },
};

function crd(): KubeObject {
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: 'clusters.cluster.x-k8s.io', labels: { 'cluster.x-k8s.io/provider': 'cluster-api' } },
    spec: {
      group: 'cluster.x-k8s.io',
      names: { kind: 'Cluster', plural: 'clusters' },
      scope: 'Namespaced',
      conversion: { strategy: 'Webhook', webhook: { clientConfig: { url: 'https://127.0.0.1:9443/convert' }, conversionReviewVersions: ['v1'] } },
      versions: [
        { name: 'v1beta1', served: true, storage: false, schema: { openAPIV3Schema: schema }, subresources: { status: {} } },
        { name: 'v1beta2', served: true, storage: true, schema: { openAPIV3Schema: schema }, additionalPrinterColumns: [{ name: 'Phase', type: 'string', jsonPath: '.status.phase', description: 'Cluster phase' }] },
      ],
    },
  };
}

describe('withoutDescriptions', () => {
  it('drops every description keyword, keeps fields named description and every rule', () => {
    expect(withoutDescriptions(schema)).toEqual(stripped);
  });

  it('leaves its input untouched', () => {
    const before = JSON.stringify(schema);
    withoutDescriptions(schema);
    expect(JSON.stringify(schema)).toBe(before);
  });
});

describe('lightenCrd', () => {
  it('keeps the storage version alone, without conversion, its schema stripped, its printer columns kept', () => {
    const original = crd();
    const light = lightenCrd(original);
    const spec = light.spec as { versions: { name: string; served: boolean; storage: boolean; schema: { openAPIV3Schema: unknown }; additionalPrinterColumns?: unknown }[]; conversion: unknown };
    expect(spec.versions.map((v) => [v.name, v.served, v.storage])).toEqual([['v1beta2', true, true]]);
    expect(spec.versions[0]?.schema.openAPIV3Schema).toEqual(stripped);
    expect(spec.conversion).toEqual({ strategy: 'None' });
    expect(spec.versions[0]?.additionalPrinterColumns).toEqual([{ name: 'Phase', type: 'string', jsonPath: '.status.phase', description: 'Cluster phase' }]);
    expect(light.metadata).toEqual(original.metadata);
    expect(JSON.stringify(light).length).toBeLessThan(JSON.stringify(original).length);
  });

  it('keeps every version, and the conversion, of a CRD that marks no single storage version', () => {
    const original = crd();
    const spec = original.spec as { versions: { storage: boolean; subresources?: unknown }[]; conversion: unknown };
    for (const version of spec.versions) version.storage = false;
    const light = lightenCrd(original).spec as { versions: { name: string; schema: { openAPIV3Schema: unknown }; subresources?: unknown }[]; conversion: unknown };
    expect(light.versions.map((v) => v.name)).toEqual(['v1beta1', 'v1beta2']);
    for (const version of light.versions) expect(version.schema.openAPIV3Schema).toEqual(stripped);
    expect(light.versions[0]?.subresources).toEqual({ status: {} });
    expect(light.conversion).toEqual(spec.conversion);
  });

  it('returns other objects as they are', () => {
    const namespace: KubeObject = { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'capi-system' } };
    expect(lightenCrd(namespace)).toBe(namespace);
  });
});

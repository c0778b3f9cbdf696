import { describe, expect, it } from 'vitest';
import type { KubeObject } from '../kube/client.js';
import { UnservedWebhookError, rewriteWebhooks, type WebhookEndpoints } from './webhooks.js';

const caPem = '-----BEGIN CERTIFICATE-----\nTEST CA\n-----END CERTIFICATE-----\n';
const caBundle = Buffer.from(caPem).toString('base64');
const endpoints: WebhookEndpoints = new Map([
  ['capi-system', { port: 9443 }],
  ['capd-system', { port: 9444 }],
]);

function webhookConfiguration(kind: 'MutatingWebhookConfiguration' | 'ValidatingWebhookConfiguration', namespace: string): KubeObject {
  return {
    apiVersion: 'admissionregistration.k8s.io/v1',
    kind,
    metadata: { name: `${namespace}-webhooks` },
    webhooks: [
      { name: 'a.example.com', sideEffects: 'None', clientConfig: { service: { name: 'webhook-service', namespace, path: '/mutate-a' } } },
      { name: 'b.example.com', clientConfig: { service: { name: 'webhook-service', namespace, path: '/validate-b', port: 443 }, caBundle: 'old' } },
    ],
  };
}

function crd(conversion: unknown): KubeObject {
  return { apiVersion: 'apiextensions.k8s.io/v1', kind: 'CustomResourceDefinition', metadata: { name: 'clusters.cluster.x-k8s.io' }, spec: { group: 'cluster.x-k8s.io', conversion } };
}

describe('rewriteWebhooks', () => {
  for (const kind of ['MutatingWebhookConfiguration', 'ValidatingWebhookConfiguration'] as const) {
    it(`points every ${kind} webhook at loopback with the CA`, () => {
      const original = webhookConfiguration(kind, 'capd-system');
      const before = structuredClone(original);
      const rewritten = rewriteWebhooks(original, endpoints, caPem);
      expect(rewritten.webhooks).toEqual([
        { name: 'a.example.com', sideEffects: 'None', clientConfig: { url: 'https://127.0.0.1:9444/mutate-a', caBundle } },
        { name: 'b.example.com', clientConfig: { url: 'https://127.0.0.1:9444/validate-b', caBundle } },
      ]);
      // A copy: the input is not modified.
      expect(original).toEqual(before);
    });
  }

  it('rewrites a CRD with Webhook conversion, keeping the review versions', () => {
    const rewritten = rewriteWebhooks(
      crd({ strategy: 'Webhook', webhook: { conversionReviewVersions: ['v1'], clientConfig: { service: { name: 'webhook-service', namespace: 'capi-system', path: '/convert' } } } }),
      endpoints,
      caPem,
    );
    expect((rewritten.spec as { conversion: unknown }).conversion).toEqual({
      strategy: 'Webhook',
      webhook: { conversionReviewVersions: ['v1'], clientConfig: { url: 'https://127.0.0.1:9443/convert', caBundle } },
    });
    expect((rewritten.spec as { group: string }).group).toBe('cluster.x-k8s.io');
  });

  it('uses / when the service has no path', () => {
    const rewritten = rewriteWebhooks(crd({ strategy: 'Webhook', webhook: { clientConfig: { service: { name: 's', namespace: 'capi-system' } } } }), endpoints, caPem);
    expect(JSON.stringify(rewritten)).toContain('"url":"https://127.0.0.1:9443/"');
  });

  it('leaves a CRD without conversion, or with None conversion, unchanged', () => {
    const none = crd(undefined);
    expect(rewriteWebhooks(none, endpoints, caPem)).toBe(none);
    const noneStrategy = crd({ strategy: 'None' });
    expect(rewriteWebhooks(noneStrategy, endpoints, caPem)).toBe(noneStrategy);
  });

  it('leaves other kinds unchanged', () => {
    const service: KubeObject = { apiVersion: 'v1', kind: 'Service', metadata: { name: 'webhook-service', namespace: 'capi-system' }, spec: { ports: [{ port: 443 }] } };
    expect(rewriteWebhooks(service, endpoints, caPem)).toBe(service);
  });

  it('throws UnservedWebhookError naming the object, webhook and namespace when no controller serves it', () => {
    const config = webhookConfiguration('ValidatingWebhookConfiguration', 'capz-system');
    expect(() => rewriteWebhooks(config, endpoints, caPem)).toThrow(UnservedWebhookError);
    expect(() => rewriteWebhooks(config, endpoints, caPem)).toThrow(
      'ValidatingWebhookConfiguration capz-system-webhooks webhook a.example.com calls a webhook in namespace capz-system, which no local controller serves',
    );
    const conversion = crd({ strategy: 'Webhook', webhook: { clientConfig: { service: { name: 's', namespace: 'nowhere' } } } });
    expect(() => rewriteWebhooks(conversion, endpoints, caPem)).toThrow(/CRD clusters.cluster.x-k8s.io conversion .*namespace nowhere/);
  });
});

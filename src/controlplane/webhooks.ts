/**
 * Rewrites the providers' webhooks to the local controller processes. In a real
 * cluster, admission and CRD-conversion webhooks call a Service in the provider's
 * namespace; there are no Services (nor Pods) here, so every clientConfig that names
 * a provider's webhook Service becomes `https://127.0.0.1:<port><path>` with our CA.
 */
import type { KubeObject } from '../kube/client.js';

export interface WebhookEndpoint {
  /** Webhook server port of the controller serving this provider namespace. */
  port: number;
}

/** Provider namespace → where its webhook server listens. */
export type WebhookEndpoints = ReadonlyMap<string, WebhookEndpoint>;

interface ClientConfig {
  service?: { name: string; namespace: string; path?: string; port?: number };
  url?: string;
  caBundle?: string;
}

export class UnservedWebhookError extends Error {}

function rewriteClientConfig(config: ClientConfig, endpoints: WebhookEndpoints, caBundle: string, where: string): ClientConfig {
  const service = config.service;
  if (!service) return { ...config, caBundle };
  const endpoint = endpoints.get(service.namespace);
  if (!endpoint) {
    throw new UnservedWebhookError(`${where} calls a webhook in namespace ${service.namespace}, which no local controller serves`);
  }
  return { url: `https://127.0.0.1:${endpoint.port}${service.path ?? '/'}`, caBundle };
}

/**
 * Returns a copy of the object with its webhook client configs pointing at loopback.
 * Objects that are neither webhook configurations nor CRDs with webhook conversion are returned unchanged.
 */
export function rewriteWebhooks(obj: KubeObject, endpoints: WebhookEndpoints, caPem: string): KubeObject {
  const caBundle = Buffer.from(caPem).toString('base64');
  if (obj.kind === 'MutatingWebhookConfiguration' || obj.kind === 'ValidatingWebhookConfiguration') {
    const webhooks = (obj.webhooks as { name: string; clientConfig: ClientConfig }[] | undefined) ?? [];
    return {
      ...obj,
      webhooks: webhooks.map((hook) => ({
        ...hook,
        clientConfig: rewriteClientConfig(hook.clientConfig, endpoints, caBundle, `${obj.kind} ${obj.metadata.name} webhook ${hook.name}`),
      })),
    };
  }
  if (obj.kind === 'CustomResourceDefinition') {
    const spec = obj.spec as { conversion?: { strategy?: string; webhook?: { clientConfig?: ClientConfig; conversionReviewVersions?: string[] } } };
    const webhook = spec.conversion?.strategy === 'Webhook' ? spec.conversion.webhook : undefined;
    if (!webhook?.clientConfig) return obj;
    return {
      ...obj,
      spec: {
        ...spec,
        conversion: {
          ...spec.conversion,
          webhook: { ...webhook, clientConfig: rewriteClientConfig(webhook.clientConfig, endpoints, caBundle, `CRD ${obj.metadata.name} conversion`) },
        },
      },
    };
  }
  return obj;
}

/**
 * The webhook serving certificates of `management install`, from provisioner's own PKI
 * (src/pki): no cert-manager. One CA (10 years) kept in the cluster as the Secret
 * `<core namespace>/provisioner-webhook-ca`, and per provider namespace a serving certificate
 * (1 year) for `webhook-service.<namespace>.svc`, kept as that namespace's
 * `webhook-service-cert` Secret, which the manager's pod mounts.
 *
 * Renewal is `management install` again: what is still good is kept as it is (so a second run
 * changes nothing), a serving certificate with less than `renewBeforeDays` left, or not signed
 * by the CA, or for other names, is issued anew; a CA with less than a year left is replaced,
 * and every serving certificate with it (the caBundles change in the same apply). The managers
 * (controller-runtime's certificate watcher) read a renewed Secret without a restart, once the
 * kubelet has updated the mounted files (about a minute).
 */
import { certificateProblem, createCertificateAuthority, issueCertificate, type CertificateAndKey } from '../pki/index.js';
import { webhookDnsNames, type WebhookCertificates } from './manifests.js';

const dayMs = 24 * 60 * 60 * 1000;
/** A serving certificate is issued anew when fewer days than this remain. */
export const renewBeforeDays = 90;
/** The CA is replaced when fewer days than this remain. */
export const caRenewBeforeDays = 365;
export const servingValidityDays = 365;
export const caValidityDays = 3650;

export interface ExistingCertificates {
  ca?: CertificateAndKey;
  /** Serving certificates found, by namespace. */
  serving: ReadonlyMap<string, CertificateAndKey | undefined>;
}

export interface EnsuredCertificates extends WebhookCertificates {
  /** What was made now: `CA` and/or namespaces, for the log. */
  issued: string[];
}

/** Keeps what is still good, issues the rest. */
export async function ensureWebhookCertificates(existing: ExistingCertificates, namespaces: readonly string[], now: Date = new Date()): Promise<EnsuredCertificates> {
  const issued: string[] = [];
  let ca = existing.ca;
  if (!ca || certificateProblem(ca, { isCa: true, minRemainingMs: caRenewBeforeDays * dayMs, now }) !== undefined) {
    ca = await createCertificateAuthority({ commonName: 'provisioner-webhook-ca', validityDays: caValidityDays, now });
    issued.push('CA');
  }
  const serving = new Map<string, CertificateAndKey>();
  for (const namespace of namespaces) {
    const dnsNames = webhookDnsNames(namespace);
    const found = existing.serving.get(namespace);
    const problem = found ? certificateProblem(found, { issuerCertPem: ca.certPem, dnsNames, usages: 'server', isCa: false, minRemainingMs: renewBeforeDays * dayMs, now }) : 'absent';
    if (found && problem === undefined) {
      serving.set(namespace, found);
      continue;
    }
    serving.set(namespace, await issueCertificate(ca, { commonName: dnsNames[0]!, dnsNames, usages: 'server', validityDays: servingValidityDays, now }));
    issued.push(namespace);
  }
  return { ca, serving, issued };
}

/**
 * Every certificate and key a local control plane (etcd, kube-apiserver, CAPI controllers'
 * webhooks) needs, created once and reused on later runs.
 *
 * Layout under `dir`:
 * ```
 * ca.crt ca.key                          cluster CA: API server serving, admin client, webhook serving
 * apiserver.crt apiserver.key            kube-apiserver serving
 * admin.crt admin.key                    client, CN provisioner-admin, O system:masters
 * sa.key sa.pub                          service-account token signing key pair
 * etcd/ca.crt etcd/ca.key                etcd CA
 * etcd/server.crt etcd/server.key        etcd serving (and its own gateway's client)
 * etcd/apiserver-etcd-client.crt|.key    kube-apiserver's client cert for etcd
 * webhooks/<controller>/tls.crt|tls.key  one per controller (controller-runtime's --webhook-cert-dir names)
 * ```
 *
 * etcd gets its own CA (as kubeadm does) rather than the cluster CA: etcd trusts every client
 * cert its CA signed, so with one shared CA the admin cert, or any client cert the cluster CA
 * ever signs, would read and write etcd directly, around the API server's authorization.
 * With a separate etcd CA, only the API server's etcd client cert opens etcd. The cost is one
 * more key at first run.
 *
 * Reuse: each item is loaded and kept when it parses, its key matches, its CA signed it, it
 * has the expected names and usages, and it stays valid longer than `renewBeforeMs`;
 * otherwise it is regenerated. A regenerated CA fails the issuer check of every cert under it,
 * so those are regenerated too.
 */
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { InternalError } from '../errors.js';
import { readIfExists } from '../files.js';
import { log, nullSink, type EventSink } from '../events.js';
import {
  certificateProblem,
  createCertificateAuthority,
  defaultCaValidityDays,
  defaultLeafValidityDays,
  issueCertificate,
  type CertificateAndKey,
  type CertificateUsage,
} from './certificates.js';
import { writeFileAtomic } from '../files.js';
import { keyPairPaths, privateDirMode, privateFileMode, publicFileMode, writeKeyPair, type CertKeyFiles } from './files.js';
import { generateServiceAccountKeyPair, isPublicKeyOf } from './keys.js';

/** Loopback names every local serving cert carries. */
const loopbackIps = ['127.0.0.1', '::1'] as const;
const loopbackDnsNames = ['localhost'] as const;
/** In-cluster names of the API server, as clients resolve the `kubernetes` Service. */
const apiServerServiceDnsNames = ['kubernetes', 'kubernetes.default', 'kubernetes.default.svc'] as const;
/** Common name and group of the admin client certificate. */
const adminCommonName = 'provisioner-admin';
const adminGroup = 'system:masters';

export interface ControlPlanePkiOptions {
  /** Controller names, one webhook serving cert each; each must be a plain file name (`[A-Za-z0-9._-]`). */
  controllers: readonly string[];
  /**
   * Addresses besides loopback the API server is reached on (the local control plane's listen
   * address, for hosts), added to its serving certificate. Default none.
   */
  apiServerIps?: readonly string[];
  /** CA validity in days. Default 3650 (10 years). */
  caValidityDays?: number;
  /** Leaf certificate validity in days. Default 365. */
  leafValidityDays?: number;
  /** A cert with less validity left than this is regenerated. Default 24 h. */
  renewBeforeMs?: number;
  /** Clock; tests move it forward to exercise renewal. Default: the current time. */
  now?: Date;
  /** Receives a debug log line per item generated. Default: dropped. */
  events?: EventSink;
}

/** A webhook serving cert: pass `certDir` as the controller's `--webhook-cert-dir`. */
export interface WebhookCertFiles extends CertKeyFiles {
  certDir: string;
}

export interface ControlPlanePki {
  dir: string;
  /** Cluster CA PEM: the API server's `--client-ca-file`, the kubeconfig CA and every webhook's caBundle. */
  caCertPem: string;
  ca: CertKeyFiles;
  apiServer: CertKeyFiles;
  admin: CertKeyFiles;
  serviceAccount: { privateKeyFile: string; publicKeyFile: string };
  etcdCa: CertKeyFiles;
  etcdServer: CertKeyFiles;
  /** kube-apiserver's `--etcd-certfile`/`--etcd-keyfile`. */
  apiServerEtcdClient: CertKeyFiles;
  /** By controller name. */
  webhooks: Record<string, WebhookCertFiles>;
  /** Items generated (not reused) by this call, e.g. `ca`, `etcd/server`, `webhooks/capi`. */
  generated: string[];
}

const defaultRenewBeforeMs = 24 * 60 * 60 * 1000;
const controllerNamePattern = /^[A-Za-z0-9][A-Za-z0-9._-]*$/;

interface LeafSpec {
  /** Path relative to the PKI dir without extension, used in `generated`. */
  id: string;
  dir: string;
  base: string;
  commonName: string;
  organizations?: readonly string[];
  dnsNames?: readonly string[];
  ipAddresses?: readonly string[];
  usages: CertificateUsage;
}

/** Creates what is missing or expiring under `dir`, reuses the rest; see the module comment. */
export async function ensureControlPlanePki(dir: string, options: ControlPlanePkiOptions): Promise<ControlPlanePki> {
  for (const name of options.controllers) {
    if (!controllerNamePattern.test(name)) throw new InternalError(`Controller name ${JSON.stringify(name)} cannot be a directory name`);
  }
  const events = options.events ?? nullSink;
  const now = options.now ?? new Date();
  const renewBeforeMs = options.renewBeforeMs ?? defaultRenewBeforeMs;
  const leafValidityDays = options.leafValidityDays ?? defaultLeafValidityDays;
  const caValidityDays = options.caValidityDays ?? defaultCaValidityDays;
  const generated: string[] = [];
  const etcdDir = join(dir, 'etcd');
  await mkdir(etcdDir, { recursive: true, mode: privateDirMode });

  const ensureCa = async (id: string, caDir: string, commonName: string): Promise<CertificateAndKey> => {
    const existing = await tryRead(caDir, 'ca');
    const problem = existing && certificateProblem(existing, { isCa: true, issuerCertPem: existing.certPem, minRemainingMs: renewBeforeMs, now });
    if (existing && problem === undefined) return existing;
    const ca = await createCertificateAuthority({ commonName, validityDays: caValidityDays, now });
    await writeKeyPair(caDir, 'ca', ca);
    generated.push(id);
    log(events, 'debug', `Generated ${id}`, { reason: existing ? (problem ?? '') : 'missing' });
    return ca;
  };

  const ensureLeaf = async (ca: CertificateAndKey, spec: LeafSpec): Promise<CertKeyFiles> => {
    const existing = await tryRead(spec.dir, spec.base);
    const problem =
      existing &&
      certificateProblem(existing, {
        issuerCertPem: ca.certPem,
        commonName: spec.commonName,
        organizations: spec.organizations,
        dnsNames: spec.dnsNames,
        ipAddresses: spec.ipAddresses,
        usages: spec.usages,
        isCa: false,
        minRemainingMs: renewBeforeMs,
        now,
      });
    if (existing && problem === undefined) return keyPairPaths(spec.dir, spec.base);
    const pair = await issueCertificate(ca, { ...spec, validityDays: leafValidityDays, now });
    const files = await writeKeyPair(spec.dir, spec.base, pair);
    generated.push(spec.id);
    log(events, 'debug', `Generated ${spec.id}`, { reason: existing ? (problem ?? '') : 'missing' });
    return files;
  };

  const serviceAccount = {
    privateKeyFile: join(dir, 'sa.key'),
    publicKeyFile: join(dir, 'sa.pub'),
  };
  const ensureServiceAccountKeys = async (): Promise<void> => {
    const [priv, pub] = await Promise.all([readIfExists(serviceAccount.privateKeyFile), readIfExists(serviceAccount.publicKeyFile)]);
    if (priv !== undefined && pub !== undefined && isPublicKeyOf(pub, priv)) return;
    const keys = await generateServiceAccountKeyPair();
    await writeFileAtomic(serviceAccount.privateKeyFile, keys.privateKeyPem, privateFileMode);
    await writeFileAtomic(serviceAccount.publicKeyFile, keys.publicKeyPem, publicFileMode);
    generated.push('sa');
    log(events, 'debug', 'Generated sa', { reason: priv === undefined || pub === undefined ? 'missing' : 'key pair mismatch' });
  };

  const servingNames = { dnsNames: [...loopbackDnsNames], ipAddresses: [...loopbackIps] };
  const webhookEntries = options.controllers.map((name) => {
    const certDir = join(dir, 'webhooks', name);
    const spec: LeafSpec = { id: `webhooks/${name}`, dir: certDir, base: 'tls', commonName: `${name}-webhook`, usages: 'server', ...servingNames };
    return { name, certDir, spec };
  });
  const ensureCertificates = async () => {
    const [clusterCa, etcdCa] = await Promise.all([ensureCa('ca', dir, 'provisioner-ca'), ensureCa('etcd/ca', etcdDir, 'provisioner-etcd-ca')]);
    const leaves = await Promise.all([
      ensureLeaf(clusterCa, {
        id: 'apiserver',
        dir,
        base: 'apiserver',
        commonName: 'kube-apiserver',
        dnsNames: [...loopbackDnsNames, ...apiServerServiceDnsNames],
        ipAddresses: [...loopbackIps, ...(options.apiServerIps ?? [])],
        usages: 'server',
      }),
      ensureLeaf(clusterCa, { id: 'admin', dir, base: 'admin', commonName: adminCommonName, organizations: [adminGroup], usages: 'client' }),
      // etcd's gRPC gateway dials etcd itself with the serving cert, hence client usage too.
      ensureLeaf(etcdCa, { id: 'etcd/server', dir: etcdDir, base: 'server', commonName: 'etcd', usages: 'both', ...servingNames }),
      ensureLeaf(etcdCa, { id: 'etcd/apiserver-etcd-client', dir: etcdDir, base: 'apiserver-etcd-client', commonName: 'kube-apiserver-etcd-client', usages: 'client' }),
      ...webhookEntries.map((w) => ensureLeaf(clusterCa, w.spec)),
    ]);
    return { clusterCa, leaves };
  };

  // Key generation runs on the libuv pool: independent items are generated concurrently.
  const [{ clusterCa, leaves }] = await Promise.all([ensureCertificates(), ensureServiceAccountKeys()]);
  const [apiServer, admin, etcdServer, apiServerEtcdClient, ...webhookFiles] = leaves;

  const webhooks: Record<string, WebhookCertFiles> = {};
  webhookEntries.forEach((w, i) => {
    const files = webhookFiles[i];
    if (files === undefined) throw new InternalError(`No webhook certificate for ${w.name}`);
    webhooks[w.name] = { ...files, certDir: w.certDir };
  });
  if (apiServer === undefined || admin === undefined || etcdServer === undefined || apiServerEtcdClient === undefined) {
    throw new InternalError('Control-plane PKI generation returned fewer items than requested');
  }

  return {
    dir,
    caCertPem: clusterCa.certPem,
    ca: keyPairPaths(dir, 'ca'),
    apiServer,
    admin,
    serviceAccount,
    etcdCa: keyPairPaths(etcdDir, 'ca'),
    etcdServer,
    apiServerEtcdClient,
    webhooks,
    generated: generated.sort(),
  };
}

async function tryRead(dir: string, base: string): Promise<CertificateAndKey | undefined> {
  const paths = keyPairPaths(dir, base);
  const [certPem, keyPem] = await Promise.all([readIfExists(paths.certFile), readIfExists(paths.keyFile)]);
  return certPem === undefined || keyPem === undefined ? undefined : { certPem, keyPem };
}

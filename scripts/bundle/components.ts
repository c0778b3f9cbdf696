/**
 * Assembles each provider's component manifest offline, from its module in the Go
 * module cache: the CRDs named by its config/crd kustomization (with that
 * kustomization's labels and conversion-webhook patches applied — the small subset of
 * kustomize these files use), its webhook configurations, its namespace and the
 * clusterctl Provider inventory entry, so `clusterctl describe` and `clusterctl move`
 * recognise our control planes; and, for the providers `management install` runs as pods, the
 * manager's ClusterRole from its own config/rbac/role.yaml (named `<provider>-manager-role`), whose
 * rules the install binds to the provider's ServiceAccount (the local control plane skips it:
 * its controllers use the admin kubeconfig).
 */
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { parseAllDocuments, stringify } from 'yaml';
import type { ComponentsRecipe } from './recipe.js';

type Json = Record<string, unknown>;

/** Labels clusterctl puts on every object it installs (`clusterctl init`). */
export const providerLabel = 'cluster.x-k8s.io/provider';
export const clusterctlLabel = 'clusterctl.cluster.x-k8s.io';
/** Name the webhook configurations and conversion clientConfigs refer to before the rewrite to loopback. */
export const webhookServiceName = 'webhook-service';

/** The name of a provider's manager ClusterRole in its components (src/management reads its rules by kind). */
function managerRoleName(provider: string): string {
  return `${provider}-manager-role`;
}

export interface AssembledComponents {
  yaml: string;
  crdNames: string[];
  webhookConfigurations: number;
}

export async function assembleComponents(recipe: ComponentsRecipe, moduleDir: string, version: string): Promise<AssembledComponents> {
  const labels = { [providerLabel]: recipe.provider, [clusterctlLabel]: '' };
  const crds: Json[] = [];
  for (const dir of recipe.crdKustomizations) {
    crds.push(...(await loadKustomizedCrds(path.join(moduleDir, dir))));
  }
  for (const crd of crds) {
    const meta = crd.metadata as Json;
    meta.labels = { ...(meta.labels as Json | undefined), ...labels };
    const annotations = meta.annotations as Record<string, string> | undefined;
    if (annotations) {
      // cert-manager injects CA bundles in a real cluster; ours are set at install time.
      for (const key of Object.keys(annotations)) if (key.startsWith('cert-manager.io/')) delete annotations[key];
    }
    const spec = crd.spec as Json;
    const conversion = spec.conversion as Json | undefined;
    if (conversion?.strategy === 'Webhook') {
      if (!recipe.binary) {
        // No controller serves this provider locally, so nothing could answer a conversion
        // call; these CRDs are only used to validate manifests at their stored version.
        spec.conversion = { strategy: 'None' };
      } else {
        const webhook = conversion.webhook as Json;
        webhook.clientConfig = { service: { name: webhookServiceName, namespace: recipe.namespace, path: '/convert' } };
      }
    }
  }

  const webhookConfigs: Json[] = [];
  for (const file of recipe.webhookManifests) {
    for (const doc of await loadDocuments(path.join(moduleDir, file))) {
      const meta = doc.metadata as Json;
      // Prefix like kustomize's namePrefix: one configuration per provider, no clashes.
      meta.name = `${recipe.provider}-${String(meta.name)}`;
      meta.labels = { ...(meta.labels as Json | undefined), ...labels };
      for (const hook of (doc.webhooks as Json[] | undefined) ?? []) {
        const service = (hook.clientConfig as Json).service as Json;
        service.name = webhookServiceName;
        service.namespace = recipe.namespace;
      }
      webhookConfigs.push(doc);
    }
  }

  const managerRoles: Json[] = [];
  if (recipe.managerRole) {
    const role = (await loadDocuments(path.join(moduleDir, recipe.managerRole))).find((d) => d.kind === 'ClusterRole');
    if (!role) throw new Error(`${recipe.provider}: no ClusterRole in ${recipe.managerRole}`);
    managerRoles.push({ apiVersion: role.apiVersion, kind: 'ClusterRole', metadata: { name: managerRoleName(recipe.provider), labels }, rules: role.rules });
  }

  const namespace = { apiVersion: 'v1', kind: 'Namespace', metadata: { name: recipe.namespace, labels } };
  const inventory = {
    apiVersion: 'clusterctl.cluster.x-k8s.io/v1alpha3',
    kind: 'Provider',
    metadata: { name: recipe.provider, namespace: recipe.namespace, labels: { ...labels, [clusterctlLabel]: 'inventory' } },
    providerName: recipe.provider.replace(/^(bootstrap|control-plane|infrastructure)-/, ''),
    type: recipe.type,
    version,
  };
  const docs = [namespace, ...crds, ...managerRoles, ...webhookConfigs, inventory];
  const source = 'ownModule' in recipe ? `this repository's ${recipe.ownModule}/` : `${recipe.module}@${version}`;
  const header = `# ${recipe.provider} ${version} (${recipe.type}), assembled by provisioner from ${source}\n`;
  return {
    yaml: header + docs.map((d) => stringify(d, { lineWidth: 0 })).join('---\n'),
    crdNames: crds.map((c) => String((c.metadata as Json).name)),
    webhookConfigurations: webhookConfigs.length,
  };
}

interface Kustomization {
  resources?: string[];
  patches?: { path: string }[];
  patchesStrategicMerge?: string[];
  labels?: { pairs: Record<string, string> }[];
  commonLabels?: Record<string, string>;
}

async function loadKustomizedCrds(dir: string): Promise<Json[]> {
  const names = await readdir(dir);
  if (!names.includes('kustomization.yaml')) {
    // controller-gen's output as is (our own provider): every CRD file of the directory.
    const files = names.filter((f) => f.endsWith('.yaml')).sort();
    return (await Promise.all(files.map((f) => loadDocuments(path.join(dir, f))))).flat();
  }
  const [k] = await loadDocuments(path.join(dir, 'kustomization.yaml'));
  const kustomization = (k ?? {}) as Kustomization;
  const crds: Json[] = [];
  for (const resource of kustomization.resources ?? []) crds.push(...(await loadDocuments(path.join(dir, resource))));
  const byName = new Map(crds.map((c) => [String((c.metadata as Json).name), c]));
  const patchFiles = [...(kustomization.patches ?? []).map((p) => p.path), ...(kustomization.patchesStrategicMerge ?? [])];
  for (const file of patchFiles) {
    for (const patch of await loadDocuments(path.join(dir, file))) {
      const target = byName.get(String((patch.metadata as Json | undefined)?.name));
      if (target) mergeInto(target, patch);
    }
  }
  const labels = {
    ...(kustomization.commonLabels ?? {}),
    ...Object.assign({}, ...(kustomization.labels ?? []).map((l) => l.pairs)),
  } as Record<string, string>;
  for (const crd of crds) {
    const meta = crd.metadata as Json;
    meta.labels = { ...(meta.labels as Json | undefined), ...labels };
  }
  return crds;
}

/** Strategic merge as these patches need it: maps merge recursively, everything else replaces. */
function mergeInto(target: Json, patch: Json): void {
  for (const [key, value] of Object.entries(patch)) {
    const current = target[key];
    if (isMap(value) && isMap(current)) mergeInto(current, value);
    else target[key] = value;
  }
}

function isMap(v: unknown): v is Json {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

async function loadDocuments(file: string): Promise<Json[]> {
  const text = await readFile(file, 'utf8');
  return parseAllDocuments(text)
    .map((d) => d.toJSON() as unknown)
    .filter((d): d is Json => isMap(d));
}

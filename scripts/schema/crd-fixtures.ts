/**
 * Extracts the served schema (openAPIV3Schema, descriptions removed) of every kind the
 * manifests contain from the provider CRDs in the Go module cache, into
 * test/fixtures/crd-schemas/, so unit tests validate generated objects against the real
 * CRDs without the module cache. Versions are those the bundle pins (CAPI v1.14.2, its test
 * module v1.14.0) and CAPA v2.13.0 (the version src/platforms/aws was written against).
 *   npx tsx scripts/schema/crd-fixtures.ts
 */
import { execFileSync } from 'node:child_process';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const outDir = path.join(repoRoot, 'test/fixtures/crd-schemas');

const modCache = process.env.GOMODCACHE ?? execFileSync('go', ['env', 'GOMODCACHE'], { encoding: 'utf8' }).trim();

const sources: { module: string; file: string; version: string }[] = [
  { module: 'sigs.k8s.io/cluster-api@v1.14.2', file: 'core/config/crd/bases/cluster.x-k8s.io_clusters.yaml', version: 'v1beta2' },
  { module: 'sigs.k8s.io/cluster-api@v1.14.2', file: 'core/config/crd/bases/cluster.x-k8s.io_machinedeployments.yaml', version: 'v1beta2' },
  { module: 'sigs.k8s.io/cluster-api@v1.14.2', file: 'core/config/crd/bases/cluster.x-k8s.io_clusterclasses.yaml', version: 'v1beta2' },
  { module: 'sigs.k8s.io/cluster-api@v1.14.2', file: 'controlplane/kubeadm/config/crd/bases/controlplane.cluster.x-k8s.io_kubeadmcontrolplanetemplates.yaml', version: 'v1beta2' },
  { module: 'sigs.k8s.io/cluster-api@v1.14.2', file: 'controlplane/kubeadm/config/crd/bases/controlplane.cluster.x-k8s.io_kubeadmcontrolplanes.yaml', version: 'v1beta2' },
  { module: 'sigs.k8s.io/cluster-api@v1.14.2', file: 'bootstrap/kubeadm/config/crd/bases/bootstrap.cluster.x-k8s.io_kubeadmconfigtemplates.yaml', version: 'v1beta2' },
  { module: 'sigs.k8s.io/cluster-api/test@v1.14.0', file: 'infrastructure/docker/config/crd/bases/infrastructure.cluster.x-k8s.io_devclusters.yaml', version: 'v1beta2' },
  { module: 'sigs.k8s.io/cluster-api/test@v1.14.0', file: 'infrastructure/docker/config/crd/bases/infrastructure.cluster.x-k8s.io_devmachinetemplates.yaml', version: 'v1beta2' },
  { module: 'sigs.k8s.io/cluster-api/test@v1.14.0', file: 'infrastructure/docker/config/crd/bases/infrastructure.cluster.x-k8s.io_devclustertemplates.yaml', version: 'v1beta2' },
  { module: 'sigs.k8s.io/cluster-api-provider-aws/v2@v2.13.0', file: 'config/crd/bases/infrastructure.cluster.x-k8s.io_awsclusters.yaml', version: 'v1beta2' },
  { module: 'sigs.k8s.io/cluster-api-provider-aws/v2@v2.13.0', file: 'config/crd/bases/infrastructure.cluster.x-k8s.io_awsmachinetemplates.yaml', version: 'v1beta2' },
  { module: 'sigs.k8s.io/cluster-api-provider-aws/v2@v2.13.0', file: 'config/crd/bases/infrastructure.cluster.x-k8s.io_awsclustertemplates.yaml', version: 'v1beta2' },
];

function strip(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(strip);
  if (value && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value as Record<string, unknown>).filter(([k]) => k !== 'description').map(([k, v]) => [k, strip(v)]));
  }
  return value;
}

await mkdir(outDir, { recursive: true });
for (const source of sources) {
  const crd = parse(await readFile(path.join(modCache, source.module, source.file), 'utf8')) as {
    spec: { group: string; names: { kind: string }; scope: string; versions: { name: string; schema: { openAPIV3Schema: unknown } }[] };
  };
  const served = crd.spec.versions.find((v) => v.name === source.version);
  if (!served) throw new Error(`${source.file} has no version ${source.version}`);
  const fixture = {
    source: `${source.module}/${source.file}`,
    group: crd.spec.group,
    version: source.version,
    kind: crd.spec.names.kind,
    scope: crd.spec.scope,
    schema: strip(served.schema.openAPIV3Schema),
  };
  const out = path.join(outDir, `${crd.spec.group}_${crd.spec.names.kind}.json`);
  await writeFile(out, JSON.stringify(fixture) + '\n');
  process.stdout.write(`wrote ${path.relative(repoRoot, out)}\n`);
}

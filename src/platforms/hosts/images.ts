/**
 * `provisioner images load` on the hosts platform: the loaded archives join what every
 * bootstrap plan downloads and imports (nodes that join later get them), and each host the
 * cluster holds now runs a NodePlan that downloads them by digest and imports them. The plan
 * is named by the set's digests, so running the command again finds it Applied and runs
 * nothing twice; a host whose plan fails ends the command naming the host and the plan.
 */
import { createHash } from 'node:crypto';
import { hostLabel, agentApiVersion } from '../../agent/registration.js';
import { MachinesError } from '../../errors.js';
import { KubeClient, type KubeObject } from '../../kube/client.js';
import { polling, until } from '../../progress/until.js';
import type { PlatformHookContext, ServedArtifact } from '../platform.js';
import { clusterNameLabel } from '../types.js';
import { importArchive, loadedArchiveDirectory } from './node-settings.js';
import { infrastructureApiVersion, loadedImagesOfLabel, offerArtifacts, type HostMachineObject } from './registration.js';

interface NodePlanObject extends KubeObject {
  status?: { phase?: string; message?: string };
}

/** Loads `images` (served by the control plane) onto every host of the config's cluster and waits until each imported them. */
export async function loadImagesOnHosts(context: PlatformHookContext, images: readonly ServedArtifact[]): Promise<void> {
  await offerArtifacts(context);
  const client = KubeClient.fromFile(context.kubeconfig);
  try {
    const { name: clusterName, namespace } = context.config.metadata;
    const machines = await client.list<HostMachineObject>(infrastructureApiVersion, 'HostMachine', { namespace, labelSelector: `${clusterNameLabel}=${clusterName}` });
    const hosts = [...new Set(machines.map((m) => m.status?.hostRef?.name).filter((h): h is string => Boolean(h)))].sort();
    if (hosts.length === 0) {
      context.log(`No host holds a machine of cluster ${namespace}/${clusterName} yet: hosts that join get the loaded images with their bootstrap plan`);
      return;
    }
    const set = createHash('sha256').update(images.map((i) => i.sha256).sort().join('\n')).digest('hex').slice(0, 10);
    const planName = `load-images-${set}`;
    const files = images.map((image) => {
      if (image.url === undefined) throw new Error(`${image.path} is served on no address the hosts reach`);
      return { path: `${loadedArchiveDirectory}/${image.sha256}.tar`, contentRef: { url: image.url, digest: `sha256:${image.sha256}` }, mode: '0644' };
    });
    const importAll = files.map((f) => `${importArchive(f.path)} || exit 1`).join('\n');
    for (const host of hosts) {
      await client.apply({
        apiVersion: agentApiVersion,
        kind: 'NodePlan',
        metadata: { name: planName, namespace: `host-${host}`, labels: { [hostLabel]: host, [loadedImagesOfLabel]: `${namespace}.${clusterName}` } },
        spec: { files, instructions: [{ name: 'import-images', command: '/bin/sh', args: ['-c', importAll], saveOutput: true }] },
      } as KubeObject);
    }
    context.log(`Loading ${images.length} image archive(s) onto ${hosts.length} host(s) with NodePlan ${planName}: ${hosts.join(', ')}`);
    const look = async () => {
      const plans = await Promise.all(hosts.map(async (host) => ({ host, plan: await client.get<NodePlanObject>({ apiVersion: agentApiVersion, kind: 'NodePlan', metadata: { name: planName, namespace: `host-${host}` } }) })));
      const failed = plans.find((p) => p.plan?.status?.phase === 'Failed');
      if (failed) {
        return {
          state: 'failed' as const,
          value: 0,
          progress: `host ${failed.host} failed`,
          error: new MachinesError(`Host ${failed.host} could not load the images: NodePlan host-${failed.host}/${planName} failed: ${failed.plan?.status?.message ?? 'no message'}`, {
            hint: `\`provisioner plan status --host ${failed.host} ${planName}\` shows its output; fix the cause, then run the same command again.`,
          }),
        };
      }
      const applied = plans.filter((p) => p.plan?.status?.phase === 'Applied').length;
      return { state: applied === hosts.length ? ('done' as const) : ('waiting' as const), value: applied, progress: `${applied} of ${hosts.length} host(s) imported the images` };
    };
    await until(polling(look, 1_000), {
      what: `the images on ${hosts.length} host(s)`,
      signal: context.signal,
      ...(context.noProgressTimeoutMs !== undefined ? { noProgressTimeoutMs: context.noProgressTimeoutMs } : {}),
      onProgress: (seen) => {
        if (seen.state === 'waiting' && seen.progress) context.log(seen.progress);
      },
      onStall: (_last, stalledMs) =>
        new MachinesError(`No host imported the images for ${Math.round(stalledMs / 1000)} s (NodePlan ${planName})`, {
          hint: 'Check that the hosts\' agents run (`provisioner hosts list` shows their heartbeats), then run the same command again.',
        }),
    });
    context.log(`Every host of the cluster imported the images: ${hosts.join(', ')}`);
  } finally {
    client.close();
  }
}

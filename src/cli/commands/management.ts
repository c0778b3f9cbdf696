import { Option, type Command } from 'commander';
import { dirOption, listenAddressOption, noProgressTimeoutOption } from '../options.js';
import type { Runner } from '../program.js';
import { formatTable } from '../../text-table.js';
import { formatDuration } from '../ui/plain.js';

export function registerManagement(program: Command, run: Runner): void {
  const management = program
    .command('management')
    .description('a management cluster: local processes that stay up (start, stop, status: etcd, kube-apiserver and every bundled CAPI provider on loopback), or the bundled providers installed into a real cluster (install)')
    .addHelpText(
      'after',
      '\nExamples:\n  provisioner management start --dir ./mgmt     # prints the kubeconfig path when ready\n' +
        '  kubectl --kubeconfig ./mgmt/auth/management.kubeconfig get providers -A\n' +
        '  provisioner management status --dir ./mgmt\n  provisioner management stop --dir ./mgmt      # data stays; start brings it back\n' +
        '  provisioner management install --kubeconfig ./demo/auth/kubeconfig --dir ./demo   # providers as pods in that cluster',
    );

  management
    .command('start')
    .description('start it (or bring it back after a stop, kill or reboot, with the same objects) and print its kubeconfig path')
    .addOption(dirOption())
    .addOption(listenAddressOption())
    .addOption(
      // No .choices(): the platform registry is imported only when the command runs (startup.test.ts); an unknown name is a usage error naming the choices.
      new Option('--platform <platform>', "run only the providers this platform's clusters need (and the agent provider), installing only their CRDs; one of `create install-config --platform`'s choices; default: the platform of --dir's install-config.yaml, else every bundled provider")
        .env('PROVISIONER_PLATFORM'),
    )
    .addHelpText(
      'after',
      '\nWith --platform hosts (or, without the flag, an install config of the hosts platform in --dir)\n' +
        'it runs etcd, kube-apiserver and one capi-manager (the core, kubeadm and agent providers):\n' +
        'no other infrastructure provider, and no CRDs of one. With neither, every bundled provider runs.\n',
    )
    .action(
      run<{ dir: string; listenAddress?: string; platform?: string }>(async (options, ctx) => {
        const { startManagement } = await import('../../services/management.js');
        const result = await startManagement({
          dir: options.dir,
          sink: ctx.sink,
          signal: ctx.signal,
          ...(options.listenAddress ? { listenAddress: options.listenAddress } : {}),
          ...(options.platform ? { platform: options.platform } : {}),
        });
        ctx.sink.emit({
          type: 'result',
          kind: 'kubeconfig',
          text: result.kubeconfig,
          data: { kubeconfig: result.kubeconfig, alreadyRunning: result.alreadyRunning, durationMs: Math.round(result.durationMs) },
        });
        if (!result.alreadyRunning) ctx.sink.emit({ type: 'log', level: 'info', message: `Management cluster ready in ${formatDuration(result.durationMs)}` });
      }),
    );

  management
    .command('install')
    .description('install the bundled providers into a real cluster as Deployments, the way clusterctl init lays them out, offline (no cert-manager; images loaded onto the nodes, or pushed to a registry you name)')
    .addOption(new Option('--kubeconfig <file>', 'kubeconfig of the cluster to install into (required)').env('PROVISIONER_KUBECONFIG').makeOptionMandatory())
    .addOption(new Option('--dir <path>', 'install directory of the hosts cluster the kubeconfig reaches: the images are loaded onto its nodes (`images load`)').env('PROVISIONER_DIR'))
    .addOption(new Option('--image-registry <host[:port][/path]>', 'push the images to this registry (OCI distribution API) and run the Deployments from it, pinned by digest, instead of loading them onto the nodes; HTTPS, or plain HTTP for a loopback registry (127.0.0.1, ::1, localhost); default: none (images loaded with --dir)').env('PROVISIONER_IMAGE_REGISTRY'))
    .addOption(new Option('--image-registry-auth-file <file>', "Docker config.json whose auths entry for the registry's host holds the credentials (what docker login writes; mode 0600); default: none (anonymous pushes)").env('PROVISIONER_IMAGE_REGISTRY_AUTH_FILE'))
    .addOption(new Option('--image-registry-ca-file <file>', "PEM file of the CA that signed the registry's certificate, trusted besides the system's; default: none (the system's CAs)").env('PROVISIONER_IMAGE_REGISTRY_CA_FILE'))
    .addOption(new Option('--dry-run', 'print what it would create (and push, with --image-registry) and change nothing').env('PROVISIONER_DRY_RUN').default(false))
    .addOption(noProgressTimeoutOption())
    .addHelpText(
      'after',
      '\nWhat it installs, per provider (core Cluster API, kubeadm bootstrap, kubeadm control plane, and\n' +
        'the hosts infrastructure provider with its agent manager): its namespace, CRDs, a ServiceAccount\n' +
        'with the ClusterRole its source declares, a Deployment of the bundled manager, the webhook Service\n' +
        'and webhook configurations, and clusterctl\'s inventory (providers.clusterctl.cluster.x-k8s.io), so\n' +
        '`clusterctl describe`, `move` and `upgrade plan` recognise them.\n' +
        '\nImages are built from the bundled binaries (provisioner.local/capi-manager:<version>, ...). With\n' +
        '--dir D of a hosts install whose cluster the kubeconfig reaches, they are put on every node\n' +
        'without a registry, as `images load` does; without it, import the archives it names on each node.\n' +
        'With --image-registry R they are pushed to R instead (R/capi-manager:<version>, ...; only the\n' +
        'blobs R does not have yet) and the Deployments name them there, pinned by digest; the nodes pull\n' +
        'them, so R must be reachable from them. Credentials come from a file only\n' +
        '(--image-registry-auth-file, a Docker config.json); a private CA with --image-registry-ca-file.\n' +
        '\nWebhook certificates come from provisioner\'s own CA (Secret capi-system/provisioner-webhook-ca,\n' +
        '10 years); each serving certificate lasts 1 year. Run management install again to renew: it\n' +
        'reissues those with fewer than 90 days left and changes nothing else. It is idempotent and\n' +
        'resumable (killed anywhere, run it again); a cluster with other versions of these providers is\n' +
        'refused, naming them.\n' +
        '\nExamples:\n  provisioner management install --kubeconfig ./demo/auth/kubeconfig --dir ./demo --dry-run\n' +
        '  provisioner management install --kubeconfig ./demo/auth/kubeconfig --dir ./demo\n' +
        '  provisioner management install --kubeconfig ./k.yaml --image-registry registry.example.com/provisioner \\\n' +
        '      --image-registry-auth-file ~/.docker/config.json --dry-run      # prints the pushes it would make\n' +
        '  kubectl --kubeconfig ./demo/auth/kubeconfig get providers -A\n',
    )
    .action(
      run<{ kubeconfig: string; dir?: string; imageRegistry?: string; imageRegistryAuthFile?: string; imageRegistryCaFile?: string; dryRun: boolean; noProgressTimeout?: number }>(async (options, ctx) => {
        const { installManagement, describePlan } = await import('../../services/management-install.js');
        const result = await installManagement({
          kubeconfig: options.kubeconfig,
          ...(options.dir ? { dir: options.dir } : {}),
          ...(options.imageRegistry !== undefined ? { imageRegistry: options.imageRegistry } : {}),
          ...(options.imageRegistryAuthFile !== undefined ? { imageRegistryAuthFile: options.imageRegistryAuthFile } : {}),
          ...(options.imageRegistryCaFile !== undefined ? { imageRegistryCaFile: options.imageRegistryCaFile } : {}),
          dryRun: options.dryRun,
          sink: ctx.sink,
          signal: ctx.signal,
          ...(options.noProgressTimeout ? { noProgressTimeoutMs: options.noProgressTimeout * 60_000 } : {}),
        });
        const summary = result.dryRun
          ? describePlan(result)
          : [
              ...result.providers.map((p) => `${p.namespace}/${p.name} Available (${p.provider} ${p.version})`),
              ...result.images.filter((i) => i.pushedAs).map((i) => `pushed ${i.pushedAs}: ${i.blobsUploaded ?? 0} blob(s) uploaded, ${i.blobsExisting ?? 0} already there`),
              `${result.created.length} object(s) created, ${result.changed.length} changed, ${result.unchanged.length} unchanged` +
                (result.certificatesIssued.length ? `; certificates issued: ${result.certificatesIssued.join(', ')}` : ''),
              `images ${formatDuration(result.timings.imagesMs)}, Deployments Available ${formatDuration(result.timings.availableMs)}, in all ${formatDuration(result.timings.totalMs)}`,
            ].join('\n');
        ctx.sink.emit({ type: 'result', kind: 'management-install', text: summary, data: result });
      }),
    );

  management
    .command('stop')
    .description('stop every process of it (controllers, then the API server, then etcd); its data stays')
    .addOption(dirOption())
    .action(
      run<{ dir: string }>(async (options, ctx) => {
        const { stopManagement } = await import('../../services/management.js');
        const stopped = await stopManagement({ dir: options.dir, sink: ctx.sink, signal: ctx.signal });
        ctx.sink.emit({ type: 'result', kind: 'stopped', text: stopped.length ? `stopped ${stopped.join(', ')}` : 'nothing was running', data: { stopped } });
      }),
    );

  management
    .command('status')
    .description('show each process: pid, running, health, ports and log file')
    .addOption(dirOption())
    .action(
      run<{ dir: string }>(async (options, ctx) => {
        const { managementStatus } = await import('../../services/management.js');
        const status = await managementStatus(options.dir);
        const rows = status.processes.map((p) => [
          p.name,
          String(p.pid),
          p.running ? (p.healthy ? 'healthy' : 'unhealthy') : 'stopped',
          Object.entries(p.ports).map(([k, v]) => `${k}=${v}`).join(' '),
          p.logFile,
        ]);
        const header = ['PROCESS', 'PID', 'STATE', 'PORTS', 'LOG'];
        const lines = formatTable(header, rows);
        // Why each unhealthy process failed its probe, under the table: the next step is its log.
        const reasons = status.processes.flatMap((p) => (p.unhealthyReason ? [`${p.name} unhealthy: ${p.unhealthyReason} (its log: ${p.logFile})`] : []));
        const text = status.processes.length ? [...lines, `kubeconfig: ${status.kubeconfig}`, ...reasons].join('\n') : `no management cluster recorded in ${options.dir}`;
        ctx.sink.emit({ type: 'result', kind: 'status', text, data: status });
      }),
    );
}

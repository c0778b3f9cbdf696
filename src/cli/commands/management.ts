import type { Command } from 'commander';
import { dirOption, listenAddressOption } from '../options.js';
import type { Runner } from '../program.js';
import { formatTable } from '../../text-table.js';
import { formatDuration } from '../ui/plain.js';

export function registerManagement(program: Command, run: Runner): void {
  const management = program
    .command('management')
    .description('run a local management cluster that stays up (etcd, kube-apiserver and every bundled CAPI provider on loopback)')
    .addHelpText(
      'after',
      '\nExamples:\n  provisioner management start --dir ./mgmt     # prints the kubeconfig path when ready\n' +
        '  kubectl --kubeconfig ./mgmt/auth/management.kubeconfig get providers -A\n' +
        '  provisioner management status --dir ./mgmt\n  provisioner management stop --dir ./mgmt      # data stays; start brings it back',
    );

  management
    .command('start')
    .description('start it (or bring it back after a stop, kill or reboot, with the same objects) and print its kubeconfig path')
    .addOption(dirOption())
    .addOption(listenAddressOption())
    .action(
      run<{ dir: string; listenAddress?: string }>(async (options, ctx) => {
        const { startManagement } = await import('../../services/management.js');
        const result = await startManagement({ dir: options.dir, sink: ctx.sink, signal: ctx.signal, ...(options.listenAddress ? { listenAddress: options.listenAddress } : {}) });
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
        const text = status.processes.length ? `${lines.join('\n')}\nkubeconfig: ${status.kubeconfig}` : `no management cluster recorded in ${options.dir}`;
        ctx.sink.emit({ type: 'result', kind: 'status', text, data: status });
      }),
    );
}

import { Option, type Command } from 'commander';
import { dirOption } from '../options.js';
import type { Runner } from '../program.js';
import { formatTable } from '../../text-table.js';

export function registerHosts(program: Command, run: Runner): void {
  const hosts = program
    .command('hosts')
    .description('machines this product did not create, reached through the node agent (provisioner-agent) that registers with the management cluster')
    .addHelpText(
      'after',
      '\nA host joins in two steps: print a registration command here, run it on the host\n' +
        '(it pins the API server\'s CA by checksum and trades a one-use token for a credential\n' +
        'that can only read its own plans), then start `provisioner-agent run` there.\n' +
        '\nExamples:\n  provisioner management start --dir ./mgmt\n' +
        '  provisioner hosts registration-command --dir ./mgmt --ttl 30m\n' +
        '  provisioner hosts list --dir ./mgmt',
    );

  hosts
    .command('registration-command')
    .description('create a one-use registration token and print the `provisioner-agent register` command to run on a host, with its expiry')
    .addOption(dirOption())
    // Default: the agent's defaultRegistrationTtl, 1h.
    .addOption(new Option('--ttl <duration>', 'how long the token can register a host (Go duration, e.g. 30m, 2h; default: 1h)').env('PROVISIONER_TTL'))
    .action(
      run<{ dir: string; ttl?: string }>(async (options, ctx) => {
        const { registrationCommand } = await import('../../services/hosts.js');
        const result = await registrationCommand({ dir: options.dir, ...(options.ttl ? { ttl: options.ttl } : {}), signal: ctx.signal });
        ctx.sink.emit({
          type: 'result',
          kind: 'registration-command',
          text: [
            result.command,
            `# one host only; the token expires at ${result.expiresAt}`,
            ...(result.reachableFromHosts
              ? []
              : ['# the server is the loopback API server: only an agent on this machine reaches it (start the control plane with --listen-address <ip> for other hosts)']),
          ].join('\n'),
          data: result,
          secret: true,
        });
      }),
    );

  hosts
    .command('list')
    .description('list registered hosts: address, registration state, last heartbeat, agent version and plan namespace')
    .addOption(dirOption())
    .action(
      run<{ dir: string }>(async (options, ctx) => {
        const { listHosts } = await import('../../services/hosts.js');
        const listed = await listHosts(options.dir);
        const rows = listed.map((h) => [h.name, h.address || '-', h.registered ? 'Registered' : 'Pending', h.lastHeartbeat || '-', h.agentVersion || '-', h.planNamespace]);
        const text = listed.length ? formatTable(['HOST', 'ADDRESS', 'STATE', 'HEARTBEAT', 'AGENT', 'PLANS IN'], rows).join('\n') : 'no host has registered';
        ctx.sink.emit({ type: 'result', kind: 'hosts', text, data: { hosts: listed } });
      }),
    );
}

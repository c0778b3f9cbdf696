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

interface PlanFlags {
  dir: string;
  host: string;
}

export function registerPlan(program: Command, run: Runner): void {
  const plan = program
    .command('plan')
    .description('run a day-2 NodePlan (files, instructions, probes) on a registered host and follow it')
    .addHelpText(
      'after',
      '\nA minimal plan (plan.yaml):\n' +
        '  apiVersion: agent.provisioner.dev/v1alpha1\n  kind: NodePlan\n  metadata:\n    name: motd\n' +
        '    labels: { agent.provisioner.dev/host: web-1 }   # the host it runs on\n' +
        '  spec:\n    files: [{ path: /etc/motd, content: "managed\\n", mode: "0644" }]\n' +
        '    instructions: [{ name: sync, command: /bin/sync }]\n' +
        '\nExamples:\n  provisioner plan apply --dir ./mgmt -f plan.yaml\n' +
        '  provisioner plan status --dir ./mgmt --host web-1 motd\n  provisioner plan cancel --dir ./mgmt --host web-1 motd',
    );

  plan
    .command('apply')
    .description('create or update a NodePlan in its host\'s namespace (host-<host>); the host\'s agent runs it')
    .addOption(dirOption())
    .addOption(new Option('-f, --file <path>', 'NodePlan manifest (one document; label agent.provisioner.dev/host names the host)').env('PROVISIONER_FILE').makeOptionMandatory())
    .action(
      run<{ dir: string; file: string }>(async (options, ctx) => {
        const { applyPlan, readPlanFile } = await import('../../services/hosts.js');
        const applied = await applyPlan({ dir: options.dir, plan: await readPlanFile(options.file) });
        ctx.sink.emit({ type: 'result', kind: 'plan', text: `nodeplan ${applied.metadata.namespace}/${applied.metadata.name} applied`, data: { namespace: applied.metadata.namespace, name: applied.metadata.name } });
      }),
    );

  plan
    .command('status')
    .description('show a plan\'s phase (Pending, Executing, Applied, Failed, Cancelled) and conditions')
    .addOption(dirOption())
    .addOption(new Option('--host <name>', 'host the plan runs on').env('PROVISIONER_HOST').makeOptionMandatory())
    .argument('<plan>', 'NodePlan name')
    .action((name: string, flags: PlanFlags, command: Command) =>
      run<PlanFlags>(async (options, ctx) => {
        const { planStatus } = await import('../../services/hosts.js');
        const found = await planStatus({ dir: options.dir, host: options.host, name });
        const conditions = (found.status?.conditions ?? []).map((c) => `  ${c.type}=${c.status}${c.reason ? ` ${c.reason}` : ''}${c.message ? `: ${c.message}` : ''}`);
        const text = [`${found.metadata.name}: ${found.status?.phase ?? 'Pending'}`, ...conditions].join('\n');
        ctx.sink.emit({ type: 'result', kind: 'plan-status', text, data: { name: found.metadata.name, host: options.host, status: found.status ?? {} } });
      })(flags, command),
    );

  plan
    .command('cancel')
    .description('stop a plan: sets agent.provisioner.dev/cancel=true; the agent stops its instruction and marks it Cancelled')
    .addOption(dirOption())
    .addOption(new Option('--host <name>', 'host the plan runs on').env('PROVISIONER_HOST').makeOptionMandatory())
    .argument('<plan>', 'NodePlan name')
    .action((name: string, flags: PlanFlags, command: Command) =>
      run<PlanFlags>(async (options, ctx) => {
        const { cancelPlan } = await import('../../services/hosts.js');
        await cancelPlan({ dir: options.dir, host: options.host, name });
        ctx.sink.emit({ type: 'result', kind: 'plan-cancel', text: `cancel requested for ${name} on ${options.host}`, data: { name, host: options.host } });
      })(flags, command),
    );
}

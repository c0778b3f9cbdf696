import { Option, type Command } from 'commander';
import { dirOption } from '../options.js';
import type { Runner } from '../program.js';

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

import { InvalidArgumentError, Option, type Command } from 'commander';
// Declaring the flags needs only these two constants: the config barrel would load the YAML parser and validation.
import { platformNames, type PlatformName } from '../../config/install-config.js';
import { defaultKubernetesVersion } from '../../config/kubernetes-versions.js';
import type { NewInstallConfigAnswers } from '../../config/index.js';
import { InterruptedError, UsageError } from '../../errors.js';
import type { Runner } from '../program.js';
import { registerCreateCluster } from './create-cluster.js';
import { dirOption } from '../options.js';
import type { AnswerKey } from '../ui/install-config-prompt.js';

/** `create` subcommands, in the order --help lists them. Adding one: write its register function, list it here. */
const subcommands: readonly ((create: Command, run: Runner) => void)[] = [registerCreateInstallConfig, registerCreateManifests, registerCreateCluster];

export function registerCreate(program: Command, run: Runner): void {
  const create = program.command('create').description('create the install config, the manifests, or the cluster');
  for (const register of subcommands) register(create, run);
}

function integer(min: number) {
  return (value: string): number => {
    if (!/^\d+$/.test(value.trim()) || Number(value) < min) throw new InvalidArgumentError(`expected a whole number of at least ${min}`);
    return Number(value);
  };
}

/** Values of a repeatable flag; the environment twin is comma-separated. */
function collect(value: string, previous: string[] | undefined): string[] {
  return [...(previous ?? []), ...value.split(',').map((v) => v.trim()).filter(Boolean)];
}

interface CreateInstallConfigFlags {
  dir: string;
  name?: string;
  platform: PlatformName;
  kubernetesVersion: string;
  controlPlaneReplicas: number;
  workers: number;
  region?: string;
  sshKeyName?: string;
  instanceType: string;
  credentialsFile: string;
  force: boolean;
}

/** Flags that answer prompt questions, by answer key. */
const answerFlags: Record<AnswerKey, keyof CreateInstallConfigFlags> = {
  name: 'name',
  platform: 'platform',
  kubernetesVersion: 'kubernetesVersion',
  controlPlaneReplicas: 'controlPlaneReplicas',
  workers: 'workers',
  region: 'region',
  sshKeyName: 'sshKeyName',
  instanceType: 'instanceType',
  credentialsFile: 'credentialsFile',
};

function registerCreateInstallConfig(create: Command, run: Runner): void {
  const command = create
    .command('install-config')
    .description('write install-config.yaml: asks on a terminal, takes flags otherwise (a flag given skips its question)')
    .addOption(dirOption())
    /** `--name`: the cluster name. No default: required without a terminal. */
    .addOption(new Option('--name <name>', 'cluster name').env('PROVISIONER_NAME'))
    /** `--platform`: default `inmemory` (simulated machines, runs anywhere). */
    .addOption(new Option('--platform <platform>', 'where machines run').choices([...platformNames]).env('PROVISIONER_PLATFORM').default('inmemory'))
    /** `--kubernetes-version`: default the bundled Kubernetes version. */
    .addOption(new Option('--kubernetes-version <version>', 'Kubernetes version of the machines').env('PROVISIONER_KUBERNETES_VERSION').default(defaultKubernetesVersion))
    /** `--control-plane-replicas`: default 3 (survives the loss of one machine). */
    .addOption(new Option('--control-plane-replicas <n>', 'control-plane machines (odd)').argParser(integer(1)).env('PROVISIONER_CONTROL_PLANE_REPLICAS').default(3))
    /** `--workers`: default 2; 0 omits the worker pool and lets the control plane run workloads. */
    .addOption(new Option('--workers <n>', 'worker machines').argParser(integer(0)).env('PROVISIONER_WORKERS').default(2))
    /** `--region`: AWS region; no default, required with --platform aws. */
    .addOption(new Option('--region <region>', 'AWS region (aws)').env('PROVISIONER_REGION'))
    /** `--ssh-key-name`: EC2 key pair; default none. */
    .addOption(new Option('--ssh-key-name <name>', 'EC2 key pair installed on machines (aws)').env('PROVISIONER_SSH_KEY_NAME'))
    /** `--instance-type`: default t3.large. */
    .addOption(new Option('--instance-type <type>', 'EC2 instance type (aws)').env('PROVISIONER_INSTANCE_TYPE').default('t3.large'))
    /** `--credentials-file`: default ~/.aws/credentials. The file is referenced, never copied. */
    .addOption(new Option('--credentials-file <path>', 'AWS shared credentials file (aws)').env('PROVISIONER_CREDENTIALS_FILE').default('~/.aws/credentials'))
    /** `--force`: default false; replace an existing install-config.yaml. */
    .addOption(new Option('--force', 'replace an existing install-config.yaml').env('PROVISIONER_FORCE').default(false));

  command.action(
    run<CreateInstallConfigFlags>(async (flags, ctx) => {
      const [{ canPrompt, PromptCancelled, promptInstallConfig, toAnswers }, { createInstallConfig }] = await Promise.all([
        import('../ui/install-config-prompt.js'),
        import('../../services/install-config.js'),
      ]);
      const raw: Partial<Record<AnswerKey, string>> = {};
      const given: Partial<Record<AnswerKey, string>> = {};
      for (const [key, flag] of Object.entries(answerFlags) as [AnswerKey, keyof CreateInstallConfigFlags][]) {
        const value = flags[flag];
        if (value === undefined) continue;
        raw[key] = String(value);
        const source = command.getOptionValueSource(flag);
        if (source === 'cli' || source === 'env') given[key] = String(value);
      }
      let answers: NewInstallConfigAnswers;
      if (canPrompt({ stdin: process.stdin, stderr: process.stderr }, ctx.output) && !everyQuestionAnswered(given)) {
        try {
          answers = toAnswers(await promptInstallConfig({ stdin: process.stdin, stdout: process.stderr }, given, raw));
        } catch (error) {
          if (error instanceof PromptCancelled) throw new InterruptedError('create install-config was cancelled; nothing was written');
          throw error;
        }
      } else {
        if (!flags.name) throw new UsageError('--name is required without a terminal', { hint: 'pass --name <cluster name> (or set PROVISIONER_NAME)' });
        if (flags.platform === 'aws' && !flags.region) throw new UsageError('--region is required with --platform aws', { hint: 'pass --region, e.g. --region us-east-1 (or set PROVISIONER_REGION)' });
        answers = toAnswers(raw);
      }
      await createInstallConfig({ dir: flags.dir, answers, force: flags.force, sink: ctx.sink, signal: ctx.signal });
    }),
  );
}

/** A terminal user who passed every needed flag is not asked again. */
function everyQuestionAnswered(given: Partial<Record<AnswerKey, string>>): boolean {
  const base: AnswerKey[] = ['name', 'platform', 'kubernetesVersion', 'controlPlaneReplicas', 'workers'];
  const needed = given.platform === 'aws' ? [...base, 'region' as const] : base;
  return needed.every((key) => given[key] !== undefined);
}

interface CreateManifestsFlags {
  dir: string;
  regenerate?: string[];
  keepEdits: boolean;
}

function registerCreateManifests(create: Command, run: Runner): void {
  create
    .command('manifests')
    .description('write cluster-api/*.yaml from install-config.yaml; your edits are kept, and a conflicting change stops with the list of files')
    .addOption(dirOption())
    /** `--regenerate <file>`: repeatable; default none. Replace your edit of <file> with the generated version. */
    .addOption(new Option('--regenerate <file>', 'take the generated version of an edited file (repeatable; env: comma-separated)').argParser(collect).env('PROVISIONER_REGENERATE'))
    /** `--keep-edits`: default false. Keep every edited file even where the install config now generates something else. */
    .addOption(new Option('--keep-edits', 'keep every edited file over the generated version').env('PROVISIONER_KEEP_EDITS').default(false))
    .action(
      run<CreateManifestsFlags>(async (flags, ctx) => {
        const { createManifests } = await import('../../services/manifests.js');
        await createManifests({ dir: flags.dir, regenerate: flags.regenerate ?? [], keepEdits: flags.keepEdits, sink: ctx.sink, signal: ctx.signal });
      }),
    );
}

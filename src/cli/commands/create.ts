import { InvalidArgumentError, Option, type Command } from 'commander';
import { defaultKubernetesVersion } from '../../config/kubernetes-versions.js';
import type { NewInstallConfigAnswers } from '../../config/index.js';
import type { PlatformInput } from '../../platforms/platform.js';
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

/**
 * The platforms declare their own flags, so the registry is read to declare them. It loads
 * every platform's config schema and the YAML parser (~75 ms of CPU), which only
 * `create install-config` needs: it is imported when that command is about to parse.
 */
type PlatformRegistry = typeof import('../../platforms/registry.js');
const platformRegistry = (): Promise<PlatformRegistry> => import('../../platforms/registry.js');

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
  platform: string;
  kubernetesVersion: string;
  controlPlaneReplicas: number;
  workers: number;
  force: boolean;
}

/** Flags that answer the common prompt questions; each platform input is a flag of its own key too. */
const commonAnswerFlags = ['name', 'platform', 'kubernetesVersion', 'controlPlaneReplicas', 'workers'] as const satisfies readonly (keyof CreateInstallConfigFlags)[];

/** `sshKeyName` → `ssh-key-name`: a platform input's flag. */
function kebab(key: string): string {
  return key.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);
}

/** `ssh-key-name` → `PROVISIONER_SSH_KEY_NAME`: a flag's environment twin. */
function envOf(flag: string): string {
  return `PROVISIONER_${flag.replace(/-/g, '_').toUpperCase()}`;
}

/** A platform input as a flag: no default (an absent one leaves the install config's default), its environment twin, the platforms that take it. */
function platformInputOption(input: PlatformInput, takenBy: readonly string[]): Option {
  const flag = kebab(input.key);
  return new Option(`--${flag} <${input.valueName}>`, `${input.description}; --platform ${takenBy.join('|')}`).env(envOf(flag));
}

function registerCreateInstallConfig(create: Command, run: Runner): void {
  const command = create
    .command('install-config')
    .description('write install-config.yaml: asks on a terminal, takes flags otherwise (a flag given skips its question)');
  // Declared before the command parses its arguments (its --help included), not at start-up.
  let declared = false;
  create.hook('preSubcommand', async (_create, subcommand) => {
    if (subcommand !== command || declared) return;
    declareInstallConfigFlags(command, await platformRegistry());
    declared = true;
  });

  command.action(
    run<CreateInstallConfigFlags>(async (flags, ctx) => {
      const [{ canPrompt, PromptCancelled, promptInstallConfig, toAnswers }, { createInstallConfig }, registry] = await Promise.all([
        import('../ui/install-config-prompt.js'),
        import('../../services/install-config.js'),
        platformRegistry(),
      ]);
      const raw: Partial<Record<AnswerKey, string>> = {};
      const given: Partial<Record<AnswerKey, string>> = {};
      for (const key of [...commonAnswerFlags, ...registry.allPlatformInputs().map(({ input }) => input.key)]) {
        const value: unknown = command.getOptionValue(key);
        if (value === undefined) continue;
        raw[key] = String(value);
        const source = command.getOptionValueSource(key);
        if (source === 'cli' || source === 'env') given[key] = String(value);
      }
      let answers: NewInstallConfigAnswers;
      if (canPrompt({ stdin: process.stdin, stderr: process.stderr }, ctx.output) && !everyQuestionAnswered(given, registry)) {
        try {
          answers = toAnswers(await promptInstallConfig({ stdin: process.stdin, stdout: process.stderr }, given, raw));
        } catch (error) {
          if (error instanceof PromptCancelled) throw new InterruptedError('create install-config was cancelled; nothing was written');
          throw error;
        }
      } else {
        if (!flags.name) throw new UsageError('--name is required without a terminal', { hint: 'pass --name <cluster name> (or set PROVISIONER_NAME)' });
        for (const input of registry.platformNamed(flags.platform).inputs) {
          if (input.required && raw[input.key] === undefined) {
            const flag = kebab(input.key);
            throw new UsageError(`--${flag} is required with --platform ${flags.platform}`, { hint: `pass --${flag} <${input.valueName}> (or set ${envOf(flag)})` });
          }
        }
        answers = toAnswers(raw);
      }
      await createInstallConfig({ dir: flags.dir, answers, force: flags.force, sink: ctx.sink, signal: ctx.signal });
    }),
  );
}

function declareInstallConfigFlags(command: Command, registry: PlatformRegistry): void {
  command
    .addOption(dirOption())
    /** `--name`: the cluster name. No default: required without a terminal. */
    .addOption(new Option('--name <name>', 'cluster name').env('PROVISIONER_NAME'))
    /** `--platform`: default the registry's first platform (simulated machines, runs anywhere). */
    .addOption(new Option('--platform <platform>', 'where machines run').choices(registry.platformNames()).env('PROVISIONER_PLATFORM').default(registry.defaultPlatform.name))
    /** `--kubernetes-version`: default the bundled Kubernetes version. */
    .addOption(new Option('--kubernetes-version <version>', 'Kubernetes version of the machines').env('PROVISIONER_KUBERNETES_VERSION').default(defaultKubernetesVersion))
    /** `--control-plane-replicas`: default 3 (survives the loss of one machine). */
    .addOption(new Option('--control-plane-replicas <n>', 'control-plane machines (odd)').argParser(integer(1)).env('PROVISIONER_CONTROL_PLANE_REPLICAS').default(3))
    /** `--workers`: default 2; 0 omits the worker pool and lets the control plane run workloads. */
    .addOption(new Option('--workers <n>', 'worker machines').argParser(integer(0)).env('PROVISIONER_WORKERS').default(2))
    /** `--force`: default false; replace an existing install-config.yaml. */
    .addOption(new Option('--force', 'replace an existing install-config.yaml').env('PROVISIONER_FORCE').default(false));
  // Each platform's flags (`PlatformInput`), declared once when platforms share one.
  for (const { input, platforms } of registry.allPlatformInputs()) command.addOption(platformInputOption(input, platforms));
}

/** A terminal user who passed every needed flag is not asked again. */
function everyQuestionAnswered(given: Partial<Record<AnswerKey, string>>, registry: PlatformRegistry): boolean {
  const platform = registry.platformNamed(given.platform ?? registry.defaultPlatform.name);
  const needed = [...commonAnswerFlags, ...platform.inputs.filter((i) => i.required).map((i) => i.key)];
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

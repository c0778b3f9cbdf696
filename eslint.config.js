// Lint rules: typescript-eslint's recommended set, plus import-direction rules that keep
// the architecture honest (see docs/architecture.md). ESLint flat config does not merge
// a rule set by two blocks — the later one wins — so every file matches exactly one
// block that sets `no-restricted-imports`, with all of its patterns.
import js from '@eslint/js';
import { tsImport } from 'tsx/esm/api';
import tseslint from 'typescript-eslint';
import provisioner from './scripts/lint/no-platform-names.js';

// The names that say "platform", from the registry itself (TypeScript, loaded through tsx),
// so a platform is checked as soon as it is listed.
const { forbiddenPlatformNames } = await tsImport('./src/platforms/forbidden-names.ts', import.meta.url);
const platformNames = forbiddenPlatformNames();

const noCliOrServices = { group: ['**/cli/**', '**/services/**'], message: 'Domain modules must not import the CLI or services layer.' };
const noRendering = { group: ['ink', 'ink/*', 'react', 'react/*'], message: 'Only src/cli/ui renders.' };
const noKubeClient = { group: ['@kubernetes/client-node', '@kubernetes/client-node/*'], message: 'Only src/kube imports the Kubernetes client.' };
const noPlatforms = { group: ['**/platforms/**'], message: 'config defines the interface platforms implement (config/platform-section.ts); the registry passes them in, config never imports them.' };
const noKubernetes = { group: ['**/kube/**', '**/controlplane/**', '**/wait/**'], message: 'process/ and progress/ know nothing of Kubernetes.' };

// What start-up loads (main, program, command declarations, the renderer picker) must not
// import services, ink or react as values: commands import them inside their action, so
// `--help` and `--version` stay fast (src/cli/startup.test.ts checks the whole graph).
// Dynamic `import()` and `import type` are allowed; a separate rule name, so it adds to the blocks below.
const startupFiles = ['src/main.ts', 'src/cli/program.ts', 'src/cli/options.ts', 'src/cli/commands/**/*.ts', 'src/cli/ui/index.ts'];
const lazyOnly = {
  group: ['**/services/**', 'ink', 'ink/*', 'react', 'react/*', '**/ui/ink/**', './ink/**', '**/install-config-prompt.js'],
  message: 'Start-up must stay light: import this where it runs (a command action, the live view) with `await import(...)`.',
  allowTypeImports: true,
};

// Waiting is progress/until's job and spacing attempts is concurrency.ts's `sleep`; a timer
// imported anywhere else is the start of another hand-rolled loop or another sleep.
const timerPromisesMessage = 'Wait with progress/until (a deadline and a message), or space attempts with `sleep` from src/concurrency.ts.';
const noTimerPromises = [
  { name: 'node:timers/promises', message: timerPromisesMessage },
  { name: 'timers/promises', message: timerPromisesMessage },
];

// Services are leaves: a use case that needs another's work finds it in a domain module
// (management/attach.ts, pivot/from.ts, handoff/*/register.ts, apply/objects.ts, ...), never in a service.
const noOtherServices = { regex: '^\\./|(^|/)services/', message: 'A service never imports another service: move what both need into a domain module (docs/architecture.md, "Layers").' };

const domainModules = ['imageregistry', 'addons', 'config', 'assets', 'pki', 'controlplane', 'apply', 'lifecycle', 'wait', 'pivot', 'gather', 'embedded', 'platforms', 'progress', 'handoff', 'nodeartifacts', 'agent', 'installdir', 'management'];
// Every block refuses timers/promises too, but for the two modules that own waiting (`timersAllowed`).
const restrict = (patterns, { timersAllowed = false } = {}) => ({ 'no-restricted-imports': ['error', { paths: timersAllowed ? [] : noTimerPromises, patterns }] });

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', 'bundle/**', 'bench-results/**', 'embedded/**', '.cache/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/no-explicit-any': 'error',
    },
  },
  // Plain JavaScript entry points run on Node.
  {
    files: ['**/*.js', '**/*.mjs'],
    languageOptions: { globals: { process: 'readonly', console: 'readonly', URL: 'readonly', Buffer: 'readonly' } },
  },
  // CLI, services and top-level files: anything but the Kubernetes client.
  { files: ['src/**/*.ts', 'src/**/*.tsx'], rules: restrict([noKubeClient]) },
  // Services: nor another service (their tests import the service they test).
  { files: ['src/services/**/*.ts'], ignores: ['**/*.test.ts'], rules: restrict([noKubeClient, noOtherServices]) },
  {
    files: startupFiles,
    ignores: ['**/*.test.ts'],
    rules: { '@typescript-eslint/no-restricted-imports': ['error', { patterns: [lazyOnly] }] },
  },
  // Domain modules: no CLI, no services, no rendering, no Kubernetes client.
  { files: domainModules.map((m) => `src/${m}/**/*.ts`), rules: restrict([noCliOrServices, noRendering, noKubeClient]) },
  // kube/ is the one importer of the client; still a domain module.
  { files: ['src/kube/**/*.ts'], rules: restrict([noCliOrServices, noRendering]) },
  // config/ is below platforms/: platforms import it, never the other way (its tests may use the registry).
  { files: ['src/config/**/*.ts'], ignores: ['src/config/**/*.test.ts'], rules: restrict([noCliOrServices, noRendering, noKubeClient, noPlatforms]) },
  // Everything platform-specific lives in src/platforms/<name>/: the rest reaches a platform only
  // through the registry, so it never names one (docs/architecture.md, "Platforms"). Tests and
  // test/ name platforms on purpose; so does scripts/ (the bundle recipe, the benchmarks).
  {
    files: ['src/**/*.ts', 'src/**/*.tsx'],
    ignores: ['src/platforms/**', '**/*.test.ts', '**/*.test.tsx'],
    plugins: { provisioner },
    rules: { 'provisioner/no-platform-names': ['error', platformNames] },
  },
  // The one exception: recognising AWS access keys in logs is secret scrubbing, which runs on
  // every bundle whatever the platform (a user's shell or hook can print a key on any install).
  {
    files: ['src/gather/redact.ts', 'src/gather/collect.ts'],
    rules: { 'provisioner/no-platform-names': ['error', { ...platformNames, allowedWords: ['aws'] }] },
  },
  // Only installdir/ names provisioner's directory inside an install directory: the rest asks it for a path.
  {
    files: ['src/**/*.ts', 'src/**/*.tsx'],
    ignores: ['src/installdir/**', '**/*.test.ts', '**/*.test.tsx'],
    rules: {
      'no-restricted-syntax': [
        'error',
        ...['Literal', 'TemplateElement[value.raw]'].map((node) => ({
          selector: node === 'Literal' ? 'Literal[value=/(^|\\W)\\.provisioner(\\/|$)/]' : 'TemplateElement[value.raw=/(^|\\W)\\.provisioner(\\/|$)/]',
          message: 'Ask src/installdir/paths.ts for the path (stateDirOf, recordPath, recordRelativePath, controlPlaneStateDir).',
        })),
      ],
    },
  },
  // process/ knows nothing of Kubernetes at all, nor does progress/ (the one waiting primitive, which process/ uses too).
  { files: ['src/process/**/*.ts'], rules: restrict([noCliOrServices, noRendering, noKubeClient, noKubernetes]) },
  // installdir/ lays out files: it knows nothing of Kubernetes either.
  { files: ['src/installdir/**/*.ts'], rules: restrict([noCliOrServices, noRendering, noKubeClient, noKubernetes]) },
  { files: ['src/progress/**/*.ts'], rules: restrict([noCliOrServices, noRendering, noKubeClient, noKubernetes], { timersAllowed: true }) },
  // concurrency.ts holds the one sleep.
  { files: ['src/concurrency.ts'], rules: restrict([noKubeClient], { timersAllowed: true }) },
  // Scripts and tests outside src/ import anything, but timers/promises.
  { files: ['scripts/**/*.ts', 'test/**/*.ts', '*.ts'], rules: restrict([]) },
);

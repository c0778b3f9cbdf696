// Lint rules: typescript-eslint's recommended set, plus the import-direction rule
// that keeps domain modules free of the CLI layer (see docs/architecture.md).
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

const domainModules = [
  'config', 'assets', 'pki', 'process', 'controlplane', 'kube', 'apply',
  'lifecycle', 'wait', 'pivot', 'gather', 'embedded', 'platforms',
];

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
  {
    // Domain modules never reach up into the CLI or services, and never render.
    files: domainModules.map((m) => `src/${m}/**/*.ts`),
    rules: {
      'no-restricted-imports': ['error', {
        patterns: [
          { group: ['**/cli/**', '**/services/**'], message: 'Domain modules must not import the CLI or services layer.' },
          { group: ['ink', 'ink/*', 'react'], message: 'Only src/cli/ui renders.' },
        ],
      }],
    },
  },
  {
    // process/ knows nothing of Kubernetes.
    files: ['src/process/**/*.ts'],
    rules: {
      'no-restricted-imports': ['error', {
        patterns: [
          { group: ['@kubernetes/*', '**/kube/**', '**/controlplane/**'], message: 'process/ knows nothing of Kubernetes.' },
          { group: ['**/cli/**', '**/services/**', 'ink', 'react'], message: 'Domain modules must not import the CLI or services layer.' },
        ],
      }],
    },
  },
  {
    // Only kube/ imports the Kubernetes client.
    files: ['src/**/*.ts', 'src/**/*.tsx'],
    ignores: ['src/kube/**'],
    rules: {
      'no-restricted-imports': ['error', {
        patterns: [{ group: ['@kubernetes/client-node'], message: 'Only src/kube imports the Kubernetes client.' }],
      }],
    },
  },
);

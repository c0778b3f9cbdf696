import { defineConfig } from 'vitest/config';

// Three tiers (see README "Tests"): unit tests sit beside the code; integration and
// end-to-end tests under test/ run the real bundled binaries and never skip.
export default defineConfig({
  test: {
    projects: [
      {
        test: {
          name: 'unit',
          include: ['src/**/*.test.ts', 'src/**/*.test.tsx', 'scripts/**/*.test.ts'],
          testTimeout: 20_000,
        },
      },
      {
        test: {
          name: 'integration',
          include: ['test/integration/**/*.test.ts'],
          testTimeout: 600_000,
          hookTimeout: 600_000,
          fileParallelism: false,
        },
      },
      {
        test: {
          name: 'e2e',
          include: ['test/e2e/**/*.test.ts'],
          testTimeout: 1_200_000,
          hookTimeout: 600_000,
          fileParallelism: false,
        },
      },
    ],
  },
});

import { readFileSync, readdirSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { configDefaults, defineConfig } from 'vitest/config';

/**
 * kubectl's discovery and HTTP cache for the tests' own kubectl runs, instead of the
 * machine's ~/.kube/cache (one directory per API server the tests ever asked, left there
 * for good): a run dir of this vitest process, swept by the next run once it is gone
 * (test/support/run-dirs.ts).
 */
const env = {
  KUBECACHEDIR: path.join(os.tmpdir(), `provisioner-run-${process.pid}-kubectl-cache`),
  // Go's default GC target for the control planes' processes instead of the product's 25: the
  // suite is short of CPU on its 2-core machine, not of memory (docs/testing.md, "Cost").
  PROVISIONER_CONTROL_PLANE_GOGC: process.env.PROVISIONER_CONTROL_PLANE_GOGC ?? '100',
};

const unitFiles = ['src/**/*.test.ts', 'src/**/*.test.tsx', 'scripts/**/*.test.ts'];
/** This file's directory, vitest's root: the globs above are relative to it, whatever the working directory. */
const root = path.dirname(fileURLToPath(import.meta.url));
/** Unit test files that replace modules (vi.mock, vi.doMock): each needs a module graph of its own, so they are found, not listed. */
const moduleMockingFiles = ['src', 'scripts']
  .flatMap((dir) => readdirSync(path.join(root, dir), { recursive: true, encoding: 'utf8' }).map((file) => path.join(dir, file)))
  .filter((file) => /\.test\.tsx?$/.test(file) && /\bvi\.(do)?mock\(/.test(readFileSync(path.join(root, file), 'utf8')))
  .sort();

// Four tiers (see README "Tests"): unit tests sit beside the code; integration and
// end-to-end tests under test/ run the real bundled binaries and never skip.
export default defineConfig({
  test: {
    projects: [
      {
        test: {
          name: 'unit',
          include: unitFiles,
          exclude: [...configDefaults.exclude, ...moduleMockingFiles],
          testTimeout: 20_000,
          // The files of a worker share one module graph instead of importing it again each: the tier's CPU fell from
          // 110 s to 36 s (user + sys) and its time alone from 117 s to 77 s (docs/testing.md, "Cost"). A file that
          // replaces modules (vi.mock) runs in the isolated project below.
          isolate: false,
        },
      },
      {
        test: {
          name: 'unit-isolated',
          include: moduleMockingFiles,
          testTimeout: 20_000,
        },
      },
      {
        test: {
          name: 'integration',
          include: ['test/integration/**/*.test.ts'],
          // Removes what killed runs left: their temp dirs and the control planes recorded there.
          globalSetup: ['test/support/run-dirs.ts'],
          env,
          testTimeout: 600_000,
          hookTimeout: 600_000,
          fileParallelism: false,
        },
      },
      {
        test: {
          name: 'e2e',
          include: ['test/e2e/**/*.test.ts'],
          globalSetup: ['test/support/run-dirs.ts'],
          env,
          testTimeout: 1_200_000,
          hookTimeout: 600_000,
          fileParallelism: false,
        },
      },
      {
        // Kubernetes' e2e.test ([Conformance] tests) against a hosts cluster: one cluster at a time.
        test: {
          name: 'conformance',
          include: ['test/conformance/**/*.test.ts'],
          env,
          testTimeout: 3_600_000,
          hookTimeout: 900_000,
          fileParallelism: false,
        },
      },
    ],
  },
});

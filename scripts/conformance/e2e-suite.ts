/**
 * Running the bundle's e2e.test (Kubernetes' end-to-end suite at the bundled version, built by
 * `go test -c`; see scripts/bundle/recipe.ts) against a cluster, and reading its results: what
 * the conformance tier (test/conformance) and `npm run conformance` (run.ts) share.
 *
 * e2e.test runs directly (no ginkgo CLI, so one process and specs one after another) with
 * `KUBE_TEST_REPO_LIST` pointing every registry of the suite's image manifest at
 * provisioner.local (src/nodeartifacts/e2e-images.ts), and writes ginkgo's JSON report, whose
 * specs are read here.
 */
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { e2eImageRefs, e2eRepoList } from '../../src/nodeartifacts/e2e-images.js';

/** One spec of the suite as the report gives it. */
export interface SpecResult {
  /** The full text, e.g. `[sig-network] Services should serve a basic endpoint from pods [Conformance]`. */
  name: string;
  /** ginkgo's state: passed, failed, skipped, pending, panicked, interrupted, aborted, timedout. */
  state: string;
  seconds: number;
  /** The failure's message (first lines), for specs that did not pass or skip. */
  failure?: string;
  /** What the spec logged (the framework's log, and on failure its dump of the namespace's events), for specs that did not pass or skip. */
  output?: string;
}

/** How to start e2e.test (in a namespace for tests, directly for the runner). */
export type SuiteRunner = (command: string, args: readonly string[], env: Record<string, string>) => Promise<{ exitCode: number | undefined; stdout: string; stderr: string }>;

export interface SuiteOptions {
  e2eTest: string;
  kubectl: string;
  kubeconfig: string;
  /** ginkgo focus regex (Go syntax). */
  focus: string;
  /** ginkgo skip regex. Default: none. */
  skip?: string;
  /** ginkgo label filter, e.g. `Conformance`. Default: none. */
  labelFilter?: string;
  /** Where the repo list, the reports and the suite's output go. */
  workDir: string;
  /** Overall limit of the run (ginkgo's --timeout), e.g. `2h`. */
  timeout?: string;
  run: SuiteRunner;
}

export interface SuiteRun {
  exitCode: number | undefined;
  /** The specs that ran (skipped ones left out unless `includeSkipped`). */
  specs: SpecResult[];
  seconds: number;
  /** Where e2e.test's own output went. */
  logFile: string;
}

/**
 * Regex that matches exactly these spec names (ginkgo's focus is a Go regex over the full text,
 * which starts with a space: the suite's own container has no text, so `^` alone never matches).
 */
export function focusOf(names: readonly string[]): string {
  return names.map((name) => `(^|\\s)${name.replace(/[\\^$.*+?()[\]{}|]/g, '\\$&')}$`).join('|');
}

/** Runs e2e.test once and returns the specs of its JSON report (every spec, skipped ones too). */
export async function runSuite(options: SuiteOptions): Promise<SuiteRun> {
  await mkdir(options.workDir, { recursive: true });
  const repoList = path.join(options.workDir, 'repo-list.yaml');
  await writeFile(repoList, e2eRepoList);
  const report = path.join(options.workDir, 'report.json');
  const args = [
    '--kubeconfig', options.kubeconfig,
    '--kubectl-path', options.kubectl,
    // No cloud: the suite's own provider for clusters it knows nothing about.
    '--provider', 'skeleton',
    '--report-dir', options.workDir,
    '--ginkgo.json-report', report,
    '--ginkgo.focus', options.focus,
    ...(options.skip ? ['--ginkgo.skip', options.skip] : []),
    ...(options.labelFilter ? ['--ginkgo.label-filter', options.labelFilter] : []),
    '--ginkgo.timeout', options.timeout ?? '2h',
    '--ginkgo.no-color',
  ];
  const started = Date.now();
  const run = await options.run(options.e2eTest, args, { KUBE_TEST_REPO_LIST: repoList });
  const seconds = (Date.now() - started) / 1000;
  const logFile = path.join(options.workDir, 'e2e.log');
  await writeFile(logFile, `${run.stdout}\n${run.stderr}`);
  let specs: SpecResult[];
  try {
    specs = parseReport(await readFile(report, 'utf8'));
  } catch (error) {
    throw new Error(`e2e.test exited ${run.exitCode} and wrote no readable report (${report}); its output: ${logFile}\n${run.stderr.slice(-3000)}`, { cause: error });
  }
  return { exitCode: run.exitCode, specs, seconds, logFile };
}

interface GinkgoSpecReport {
  ContainerHierarchyTexts?: string[] | null;
  LeafNodeText?: string;
  LeafNodeType?: string;
  State?: string;
  RunTime?: number;
  Failure?: { Message?: string };
  CapturedGinkgoWriterOutput?: string;
}

/** The It specs of ginkgo's JSON report (an array of suite reports), and suite-level nodes (BeforeSuite...) that failed. */
export function parseReport(text: string): SpecResult[] {
  const suites = JSON.parse(text) as { SpecReports?: GinkgoSpecReport[] | null }[];
  const specs: SpecResult[] = [];
  for (const suite of suites) {
    for (const spec of suite.SpecReports ?? []) {
      const state = spec.State ?? 'unknown';
      // Suite-level nodes count only when they failed (a BeforeSuite that failed ran no test at all).
      if (spec.LeafNodeType !== 'It' && (state === 'passed' || state === 'skipped')) continue;
      const name = spec.LeafNodeType === 'It' ? [...(spec.ContainerHierarchyTexts ?? []), spec.LeafNodeText ?? ''].join(' ') : `[${spec.LeafNodeType ?? 'unknown node'}]`;
      const failure = spec.Failure?.Message?.split('\n').slice(0, 12).join('\n');
      const unsuccessful = state !== 'passed' && state !== 'skipped';
      specs.push({
        name, state, seconds: (spec.RunTime ?? 0) / 1e9,
        ...(failure && unsuccessful ? { failure } : {}),
        ...(spec.CapturedGinkgoWriterOutput && unsuccessful ? { output: spec.CapturedGinkgoWriterOutput } : {}),
      });
    }
  }
  return specs;
}

/** `name  state  12.3s` lines and a totals line. */
export function summarize(specs: readonly SpecResult[], seconds: number): string {
  const ran = specs.filter((s) => s.state !== 'skipped');
  const passed = ran.filter((s) => s.state === 'passed').length;
  const lines = ran.map((s) => `  ${s.state.padEnd(8)} ${s.seconds.toFixed(1).padStart(6)}s  ${s.name}`);
  lines.push(`e2e.test: ${passed} passed, ${ran.length - passed} failed of ${ran.length} run, in ${seconds.toFixed(0)}s`);
  return lines.join('\n');
}

/**
 * The images a spec that did not pass could not pull: every provisioner.local ref its failure
 * and log name in a kubelet pull event ("Failed to pull image", "Back-off pulling image"), but
 * ours (`e2eImageRefs`). Node images named elsewhere in the log ("already present") are not.
 */
export function missingImages(spec: SpecResult): string[] {
  const available = new Set<string>(Object.values(e2eImageRefs));
  const text = `${spec.failure ?? ''}\n${spec.output ?? ''}`;
  const refs = [...text.matchAll(/pull(?:ing)? image \\*"(provisioner\.local\/[\w./-]+:[\w.-]+)/gi)].map((m) => m[1]!);
  return [...new Set(refs)].filter((ref) => !available.has(ref)).sort();
}

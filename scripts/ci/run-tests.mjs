// Runs the test tiers one after another — unit, the agent provider's Go tests (go),
// integration, end to end and conformance (Kubernetes' own e2e.test, [Conformance] tests on a
// 1 + 2 hosts cluster) — so the tiers that boot real control planes never compete for this
// 2-core machine's CPU. `node scripts/ci/run-tests.mjs e2e conformance` runs the named ones.
// Every tier runs even when an earlier one failed (one run shows every failure). Above the
// closing line it prints each tier's counts, wall time and five slowest files (tier-report.mjs);
// the last line is the plain closing line CI readers look for: "tests: N passed, N failed".
import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync } from 'node:fs';
import { relative } from 'node:path';
import { performance } from 'node:perf_hooks';
import { formatTierReport, slowestGoPackages, vitestTierSummary } from './tier-report.mjs';

/** The Go linter the go tier runs, pinned (provider/Makefile's `lint` names the same). */
const staticcheck = 'honnef.co/go/tools/cmd/staticcheck@v0.8.2';
/**
 * PROVISIONER_E2E_OVERLAP=1 runs the e2e tier as two vitest processes at once, each one file
 * at a time: the hosts files (test/e2e/hosts*.test.ts, network-namespace hosts) beside the
 * others (in-memory, aws and vsphere control planes). Unset (the default): one process, one
 * file at a time, until a run on a quiet machine shows the overlap pays on two cores.
 */
const e2eOverlap = process.env.PROVISIONER_E2E_OVERLAP === '1';
const hostsFiles = 'test/e2e/hosts*.test.ts';
const tiers = process.argv.slice(2).length ? process.argv.slice(2) : ['unit', 'go', 'integration', 'e2e', 'conformance'];
rmSync('test-results', { recursive: true, force: true });
mkdirSync('test-results', { recursive: true });

let status = 0;
/** "tier: file > test" of every failure, printed again above the closing line, so the tail of a long log names them. */
const failures = [];
/** One per tier run: counts, wall time, slowest files. */
const summaries = [];
for (const tier of tiers) {
  const started = performance.now();
  if (tier === 'go') {
    const go = runGoTests();
    summaries.push({ tier, ...go.counts, wallMs: performance.now() - started, slowest: go.slowest });
    if (go.counts.failed > 0) status = 1;
    continue;
  }
  const groups =
    tier === 'e2e' && e2eOverlap
      ? [{ report: 'test-results/e2e-hosts.json', args: ['test/e2e/hosts'] }, { report: 'test-results/e2e-others.json', args: ['--exclude', hostsFiles] }]
      : [{ report: `test-results/${tier}.json`, args: [] }];
  const exits = await Promise.all(groups.map((group) => runVitest(tier, group.report, group.args)));
  const run = { status: exits.every((code) => code === 0) ? 0 : 1 };
  const wallMs = performance.now() - started;
  if (run.status !== 0) status = 1;
  try {
    const result = mergeReports(groups.map((group) => JSON.parse(readFileSync(group.report, 'utf8'))));
    const summary = vitestTierSummary(tier, result, wallMs, process.cwd());
    // A tier whose files failed to load reports no failed test: count it as one.
    if (run.status !== 0 && summary.failed === 0) {
      summary.failed = 1;
      failures.push(`${tier}: a test file failed to load or the run was stopped`);
    }
    summaries.push(summary);
    for (const file of result.testResults ?? []) {
      for (const test of file.assertionResults ?? []) {
        if (test.status === 'failed') failures.push(`${tier}: ${relative(process.cwd(), file.name)} > ${test.fullName}`);
      }
      if (file.status === 'failed' && !(file.assertionResults ?? []).some((test) => test.status === 'failed')) {
        failures.push(`${tier}: ${relative(process.cwd(), file.name)}: ${(file.message ?? 'failed').split('\n')[0]}`);
      }
    }
  } catch {
    summaries.push({ tier, passed: 0, failed: 1, skipped: 0, wallMs, slowest: [], note: 'wrote no report' });
    failures.push(`${tier}: wrote no report`);
    console.log(`tests: the ${tier} tier wrote no report`);
  }
}
/** One vitest process over `tier`'s files (narrowed by `args`), writing its JSON report; resolves to its exit code. */
function runVitest(tier, report, args) {
  const child = spawn('npx', ['vitest', 'run', '--project', tier, ...args, '--reporter=default', '--reporter=json', `--outputFile.json=${report}`], { stdio: 'inherit' });
  return new Promise((resolve) => {
    child.on('error', () => resolve(1));
    child.on('close', (code) => resolve(code ?? 1));
  });
}

/** One vitest JSON report from several (the overlapped e2e groups'): counts summed, files together. */
function mergeReports(reports) {
  if (reports.length === 1) return reports[0];
  const sum = (key) => reports.reduce((total, report) => total + (report[key] ?? 0), 0);
  return {
    numPassedTests: sum('numPassedTests'),
    numFailedTests: sum('numFailedTests'),
    numPendingTests: sum('numPendingTests'),
    numTodoTests: sum('numTodoTests'),
    testResults: reports.flatMap((report) => report.testResults ?? []),
  };
}

/**
 * The Go linters over provider/ (what `make -C provider lint` runs): `go vet`, then staticcheck
 * at a pinned version, run with `go run` so the linter's own dependencies never enter the
 * provider's go.mod (and so its shipped binaries). Each counts as one check, passed or failed.
 */
function runGoLinters(counts) {
  for (const [name, args] of [['go vet', ['vet', './...']], ['staticcheck', ['run', staticcheck, './...']]]) {
    const run = spawnSync('go', args, { cwd: 'provider', encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
    if (run.status === 0) {
      counts.passed += 1;
      console.log(`go lint pass ${name}`);
      continue;
    }
    counts.failed += 1;
    failures.push(`go: ${name} found problems (or did not run)`);
    process.stdout.write(`${run.stdout ?? ''}${run.stderr ?? ''}${run.error ? `${run.error.message}\n` : ''}`);
  }
}

/**
 * `go test -json` in provider/ against the bundle's etcd and kube-apiserver (what `make -C
 * provider test` runs), after the linters. Counts each test and subtest that passed, failed or skipped; a
 * package that fails without a failing test (it does not build) and a missing go, bundle or
 * dist count as one failure each, never as a skip. Prints failing tests' output and one
 * line per package; returns the counts and the slowest packages.
 */
function runGoTests() {
  const counts = { passed: 0, failed: 0, skipped: 0 };
  runGoLinters(counts);
  const assets = spawnSync('provider/hack/envtest-assets.sh', [], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
  if (assets.status !== 0) {
    console.log('tests: the go tier could not find etcd and kube-apiserver (provider/hack/envtest-assets.sh failed)');
    return { counts: { ...counts, failed: 1 }, slowest: [] };
  }
  const run = spawnSync('go', ['test', '-p', '1', '-json', './...'], {
    cwd: 'provider',
    encoding: 'utf8',
    maxBuffer: 256 * 1024 * 1024,
    env: { ...process.env, KUBEBUILDER_ASSETS: assets.stdout.trim() },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  if (run.error || run.status === null) {
    console.log(`tests: the go tier did not run: ${run.error?.message ?? `killed by ${run.signal}`}`);
    return { counts: { ...counts, failed: 1 }, slowest: [] };
  }
  const outputs = new Map();
  const packagesWithFailedTests = new Set();
  const events = run.stdout
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line));
  for (const event of events) {
    const id = `${event.Package} ${event.Test ?? ''}`;
    if (event.Action === 'output') outputs.set(id, (outputs.get(id) ?? '') + event.Output);
    if (!['pass', 'fail', 'skip'].includes(event.Action)) continue;
    if (event.Test !== undefined) {
      counts[{ pass: 'passed', fail: 'failed', skip: 'skipped' }[event.Action]] += 1;
      if (event.Action === 'fail') {
        packagesWithFailedTests.add(event.Package);
        failures.push(`go: ${event.Package} > ${event.Test}`);
        process.stdout.write(outputs.get(id) ?? '');
      }
      continue;
    }
    console.log(`go ${event.Action} ${event.Package}${event.Elapsed !== undefined ? ` (${event.Elapsed}s)` : ''}`);
    // A package that failed with no failing test did not build or panicked outside a test.
    if (event.Action === 'fail' && !packagesWithFailedTests.has(event.Package)) {
      counts.failed += 1;
      failures.push(`go: ${event.Package} did not build or failed outside a test`);
      process.stdout.write(outputs.get(id) ?? '');
    }
  }
  if (run.status !== 0 && counts.failed === 0) counts.failed = 1;
  console.log(`go: ${counts.passed} passed, ${counts.failed} failed${counts.skipped ? `, ${counts.skipped} skipped` : ''}`);
  return { counts, slowest: slowestGoPackages(events) };
}

for (const line of formatTierReport(summaries)) console.log(line);
const total = (key) => summaries.reduce((sum, summary) => sum + summary[key], 0);
const [passed, failed, skipped] = [total('passed'), total('failed'), total('skipped')];
if (failures.length > 0) console.log(`failed:\n${failures.map((line) => `  - ${line}`).join('\n')}`);
console.log(`tests: ${passed} passed, ${failed} failed${skipped ? `, ${skipped} skipped` : ''}`);
process.exit(status);

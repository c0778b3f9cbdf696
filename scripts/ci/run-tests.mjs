// Runs the test tiers — unit, the agent provider's Go tests (go), integration, end to end and
// conformance (Kubernetes' own e2e.test, [Conformance] tests on a 1 + 2 hosts cluster) — over
// PROVISIONER_TEST_LANES lanes (below). `node scripts/ci/run-tests.mjs e2e conformance` runs
// the named ones; `--plan` prints the lane plan and its estimated time and runs nothing.
// Every tier runs even when an earlier one failed (one run shows every failure). Above the
// closing line it prints each tier's counts, wall time and five slowest files (tier-report.mjs);
// the last line is the plain closing line CI readers look for: "tests: N passed, N failed".
import { spawn } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync } from 'node:fs';
import path, { relative } from 'node:path';
import { performance } from 'node:perf_hooks';
import { laneCount, lanesVariable, planLanes, readEstimates, runInLanes, testStages, tierFiles, withTierEstimates } from './lanes.mjs';
import { sharedGoFlags } from '../go-flags.mjs';
import { failureGist, formatSeconds, formatTierReport, slowestGoPackages, vitestTierSummary } from './tier-report.mjs';

/** The Go linter the go tier runs, pinned (provider/Makefile's `lint` names the same). */
const staticcheck = 'honnef.co/go/tools/cmd/staticcheck@v0.8.2';

/**
 * The go tier's Go environment: the bundle's (scripts/bundle/build.ts goEnv, sharedGoFlags), so
 * the Kubernetes packages it compiled for capi-manager and kube (the same k8s.io versions as
 * provider/go.mod) come from Go's build cache instead of compiling again. With cgo on (Go's
 * default where gcc exists) package net differs, and so would every package above it.
 */
const goTierEnv = { ...process.env, CGO_ENABLED: '0', GOFLAGS: `${process.env.GOFLAGS ?? ''} ${sharedGoFlags}`.trim() };

/**
 * PROVISIONER_TEST_LANES=N (default 2, lanes.mjs `defaultLanes`) runs up to N test processes at once, each job longest
 * first by its last measured time (test-times.json) on the lane that frees first, in one pool: the
 * unit and go tiers first, then each integration, e2e and conformance file as a vitest process of
 * its own (lanes.mjs `testStages`). At 1 every tier is one process, one after another.
 */
let lanes;
try {
  lanes = laneCount(process.env[lanesVariable]);
} catch (error) {
  console.log(`tests: ${error.message}`);
  process.exit(2);
}
const args = process.argv.slice(2);
/** `--plan`: print each stage's lane plan and the estimated wall time, and run nothing (default: run). */
const planOnly = args.includes('--plan');
const named = args.filter((arg) => arg !== '--plan');
const tiers = named.length ? named : ['unit', 'go', 'integration', 'e2e', 'conformance'];
const stages = testStages(tiers, lanes, (tier) => tierFiles('.', tier));
const estimates = withTierEstimates(stages, readEstimates('scripts/ci/test-times.json'));
if (planOnly) {
  let total = 0;
  for (const { jobs } of stages) total += printPlan(jobs);
  console.log(`tests: about ${Math.round(total)} s (${(total / 60).toFixed(1)} min) in all by the last measured times (scripts/ci/test-times.json), ${lanes} lane(s)`);
  process.exit(0);
}
rmSync('test-results', { recursive: true, force: true });
mkdirSync('test-results', { recursive: true });

let status = 0;
/** "tier: file > test" of every failure (a vitest test's with its message's first lines), printed again above the closing line, so the tail of a long log names them and says why. */
const failures = [];
/** One per tier run: counts, wall time, slowest files. */
const summaries = [];
for (const { tiers: stage, jobs: stageJobs } of stages) {
  const jobs = stageJobs.map((job) => ({ ...job, report: `test-results/${job.args.length ? `${job.tier}-${path.basename(job.name, '.test.ts')}` : job.tier}.json` }));
  if (jobs.length > 1) {
    warnOfInotifyLimit();
    printPlan(jobs);
  }
  const results = await runInLanes(jobs, lanes, estimates, async (job, lane) => {
    const started = performance.now();
    if (jobs.length > 1) console.log(`lane ${lane}: ${job.name} started (last ${estimates[job.name] ?? '?'} s)`);
    const outcome = job.tier === 'go' ? await runGoTests() : { exit: await runVitest(job.tier, job.report, job.args) };
    const ended = performance.now();
    if (jobs.length > 1) console.log(`lane ${lane}: ${job.name} ${outcome.exit === 0 || outcome.counts?.failed === 0 ? 'passed' : 'failed'} in ${formatSeconds(ended - started)}`);
    return { ...job, ...outcome, started, ended };
  });
  for (const tier of stage) {
    const runs = results.filter((result) => result.tier === tier);
    const wallMs = Math.max(...runs.map((r) => r.ended)) - Math.min(...runs.map((r) => r.started));
    if (tier === 'go') {
      const go = runs[0];
      summaries.push({ tier, ...go.counts, wallMs, slowest: go.slowest });
      if (go.counts.failed > 0) status = 1;
      continue;
    }
    summarizeVitestTier(tier, runs, wallMs);
  }
}

/** Says so when this machine's inotify instance limit is below what kind and others advise for several clusters at once (512). */
function warnOfInotifyLimit() {
  const limit = Number(readFileSync('/proc/sys/fs/inotify/max_user_instances', 'utf8').trim());
  if (limit < 512) {
    console.log(`tests: fs.inotify.max_user_instances is ${limit} (below 512): with other clusters on this machine, a controller of a test may exit with "too many open files"; raise it with sysctl fs.inotify.max_user_instances=512`);
  }
}

/** Prints the lane plan of one stage's jobs (when more than one) and returns its estimated seconds. */
function printPlan(jobs) {
  const plan = planLanes(jobs, lanes, estimates);
  if (jobs.length > 1) {
    console.log(`tests: ${jobs.length} jobs on ${lanes} lanes, longest first (about ${Math.round(plan.seconds)} s by the last measured times):`);
    plan.lanes.forEach((lane, index) => console.log(`  lane ${index + 1} (${Math.round(lane.seconds)} s): ${lane.jobs.join(', ')}`));
  } else {
    console.log(`tests: ${jobs[0].name} alone (about ${Math.round(plan.seconds)} s by the last measured times)`);
  }
  return plan.seconds;
}

/** One tier's summary and failures from its runs' reports (one run, or one per file). */
function summarizeVitestTier(tier, runs, wallMs) {
  const failedRun = runs.some((r) => r.exit !== 0);
  if (failedRun) status = 1;
  try {
    const result = mergeReports(runs.map((r) => JSON.parse(readFileSync(r.report, 'utf8'))));
    const summary = vitestTierSummary(tier, result, wallMs, process.cwd());
    // A tier whose files failed to load reports no failed test: count it as one.
    if (failedRun && summary.failed === 0) {
      summary.failed = 1;
      failures.push(`${tier}: a test file failed to load or the run was stopped`);
    }
    summaries.push(summary);
    for (const file of result.testResults ?? []) {
      for (const test of file.assertionResults ?? []) {
        if (test.status === 'failed') failures.push([`${tier}: ${relative(process.cwd(), file.name)} > ${test.fullName}`, ...failureGist(test.failureMessages?.[0])].join('\n'));
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
/** A tier's vitest projects: the unit tier's files that replace modules run in a project of their own (vitest.config.ts). */
function tierProjects(tier) {
  return tier === 'unit' ? ['unit', 'unit-isolated'] : [tier];
}

/** One vitest process over `tier`'s files (narrowed by `args`), writing its JSON report; resolves to its exit code. */
function runVitest(tier, report, args) {
  const child = spawn('npx', ['vitest', 'run', ...tierProjects(tier).flatMap((project) => ['--project', project]), ...args, '--reporter=default', '--reporter=json', `--outputFile.json=${report}`], { stdio: 'inherit' });
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
async function runGoLinters(counts) {
  for (const [name, args] of [['go vet', ['vet', './...']], ['staticcheck', ['run', staticcheck, './...']]]) {
    const run = await capture('go', args, { cwd: 'provider', env: goTierEnv });
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
 * Runs `command` without blocking the lanes beside it; resolves to what spawnSync would return:
 * status (null when killed), signal, stdout, stderr (empty when `stderr: 'inherit'`), error.
 */
function capture(command, args, { cwd, env, stderr = 'pipe' } = {}) {
  return new Promise((resolve) => {
    const child = spawn(command, args, { cwd, env, stdio: ['ignore', 'pipe', stderr] });
    const out = [];
    const err = [];
    const done = (status, signal, error) => resolve({ status, signal, error, stdout: Buffer.concat(out).toString('utf8'), stderr: Buffer.concat(err).toString('utf8') });
    child.stdout.on('data', (chunk) => out.push(chunk));
    child.stderr?.on('data', (chunk) => err.push(chunk));
    child.on('error', (error) => done(null, null, error));
    child.on('close', (status, signal) => done(status, signal));
  });
}

/**
 * `go test -json` in provider/ against the bundle's etcd and kube-apiserver (what `make -C
 * provider test` runs), after the linters. Counts each test and subtest that passed, failed or skipped; a
 * package that fails without a failing test (it does not build) and a missing go, bundle or
 * dist count as one failure each, never as a skip. Prints failing tests' output and one
 * line per package; returns the counts and the slowest packages.
 */
async function runGoTests() {
  const counts = { passed: 0, failed: 0, skipped: 0 };
  await runGoLinters(counts);
  const assets = await capture('provider/hack/envtest-assets.sh', [], { stderr: 'inherit' });
  if (assets.status !== 0) {
    console.log('tests: the go tier could not find etcd and kube-apiserver (provider/hack/envtest-assets.sh failed)');
    return { counts: { ...counts, failed: 1 }, slowest: [] };
  }
  const run = await capture('go', ['test', '-p', '1', '-json', './...'], {
    cwd: 'provider',
    env: { ...goTierEnv, KUBEBUILDER_ASSETS: assets.stdout.trim() },
    stderr: 'inherit',
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

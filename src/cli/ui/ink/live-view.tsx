/**
 * The live view of a long command on a TTY: stages, supervised processes, progress
 * bars, the Cluster API object tree, and the latest log lines. It only paints a
 * FramePlan (layout.ts); every decision about what fits is made there.
 *
 * Rows are memoized on the model's view objects (replaced only when they change) and
 * on preformatted strings, so a frame where only a spinner moved re-renders a few rows,
 * not the whole tree: React's development build, which the CLI runs unless NODE_ENV
 * says otherwise, makes every re-rendered element costly.
 */
import React, { memo } from 'react';
import { Box, Text } from 'ink';
import { formatAmount, formatDuration } from '../plain.js';
import { formatElapsed, isTroubled, type FramePlan } from './layout.js';
import type { LogLine, ObjectView, ProcessView, ProgressView, StageView } from './model.js';

const spinnerFrames = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];

export interface LiveViewProps {
  plan: FramePlan;
  /** Clock time of this frame (ms), for running clocks and the spinner. */
  now: number;
  /** Time per spinner step. Default: 100 ms. */
  spinnerMs?: number;
}

export function LiveView({ plan, now, spinnerMs = 100 }: LiveViewProps): React.JSX.Element {
  const spinner = spinnerFrames[Math.floor(now / spinnerMs) % spinnerFrames.length]!;
  // Columns line up up to these widths; a longer name pushes its own row only.
  const stageWidth = Math.min(40, Math.max(0, ...plan.stages.map((r) => (r.kind === 'stage' ? r.stage.stage.length : 0))));
  const processWidth = Math.min(48, Math.max(0, ...plan.processes.map((r) => (r.kind === 'process' ? r.process.name.length : 0))));
  const labelWidth = Math.min(40, Math.max(0, ...plan.progress.map((p) => p.label.length)));
  return (
    <Box flexDirection="column">
      {plan.stages.map((row) =>
        row.kind === 'finished' ? (
          <FinishedStages key="finished" count={row.count} durationMs={row.durationMs} />
        ) : (
          <StageLine
            key={`stage:${row.stage.stage}`}
            stage={row.stage}
            width={stageWidth}
            // Only a running stage changes from frame to frame.
            spinner={row.stage.state === 'started' ? spinner : ''}
            elapsed={row.stage.state === 'started' ? formatElapsed(now - row.stage.startedAt) : ''}
          />
        ),
      )}
      {plan.processes.map((row) =>
        row.kind === 'healthy' ? (
          <HealthyProcesses key="healthy" names={row.names.join(', ')} />
        ) : (
          <ProcessLine
            key={`process:${row.process.name}`}
            process={row.process}
            tailLines={row.tail.length}
            width={processWidth}
            spinner={row.process.state === 'starting' ? spinner : ''}
          />
        ),
      )}
      {plan.progress.map((p) => (
        <ProgressLine key={`progress:${p.task}`} progress={p} spinner={spinner} width={labelWidth} />
      ))}
      {plan.tree.map((row, i) => {
        switch (row.kind) {
          case 'object': {
            const o = row.object;
            const elapsed = formatElapsed((o.ready && o.readyAt !== undefined ? o.readyAt : now) - o.firstSeen);
            return (
              <ObjectLine
                key={`object:${o.key}`}
                object={o}
                branch={row.branch}
                showNamespace={row.showNamespace}
                elapsed={elapsed}
                blockingGutter={row.blockingBelow ? row.gutter : undefined}
              />
            );
          }
          case 'readyGroup':
            return <ReadyGroup key={`tree:${i}`} branch={row.branch} count={row.count} objectKind={row.objectKind} />;
          case 'more':
            return <MoreObjects key="more" count={row.count} notReady={row.notReady} />;
        }
      })}
      {plan.problems.map((line, i) => (
        <LogLineView key={`problem:${i}`} line={line} />
      ))}
      {plan.info ? <LogLineView line={plan.info} /> : null}
    </Box>
  );
}

function Line({ children }: { children: React.ReactNode }): React.JSX.Element {
  // One terminal row per line: wrapping would make the frame taller than planned.
  return <Text wrap="truncate-end">{children}</Text>;
}

const FinishedStages = memo(function FinishedStages({ count, durationMs }: { count: number; durationMs: number }) {
  return (
    <Line>
      <Text color="green">✓</Text> <Text dimColor>{`${count} stages done in ${formatDuration(durationMs)}`}</Text>
    </Line>
  );
});

const StageLine = memo(function StageLine({ stage: s, width, spinner, elapsed }: { stage: StageView; width: number; spinner: string; elapsed: string }) {
  const name = s.stage.padEnd(width);
  switch (s.state) {
    case 'started':
      return (
        <Line>
          <Text color="cyan">{spinner}</Text> {name} <Text dimColor>{elapsed}</Text>
        </Line>
      );
    case 'succeeded':
      return (
        <Line>
          <Text color="green">✓</Text> {name} <Text dimColor>{formatDuration(s.durationMs ?? 0)}</Text>
        </Line>
      );
    case 'failed':
      return (
        <Line>
          <Text color="red">{`✗ ${name}`}</Text> <Text dimColor>{formatDuration(s.durationMs ?? 0)}</Text>
          {s.message ? <Text color="red">{`  ${s.message}`}</Text> : null}
        </Line>
      );
    case 'skipped':
      return (
        <Line>
          <Text dimColor>{`- ${name} ${s.message ?? 'skipped'}`}</Text>
        </Line>
      );
  }
});

/** How each process state looks; starting shows the spinner. */
const processMarks: Record<ProcessView['state'], { mark: string; color: string }> = {
  starting: { mark: '', color: 'cyan' },
  ready: { mark: '●', color: 'green' },
  exited: { mark: '✗', color: 'red' },
  restarting: { mark: '⟳', color: 'yellow' },
  stopped: { mark: '■', color: 'gray' },
  failed: { mark: '✗', color: 'red' },
};

const HealthyProcesses = memo(function HealthyProcesses({ names }: { names: string }) {
  return (
    <Line>
      <Text color="green">●</Text> <Text dimColor>{`ready: ${names}`}</Text>
    </Line>
  );
});

const ProcessLine = memo(function ProcessLine({ process: p, tailLines, width, spinner }: { process: ProcessView; tailLines: number; width: number; spinner: string }) {
  const { mark, color } = processMarks[p.state];
  const troubled = isTroubled(p);
  const details = [
    p.pid !== undefined ? `pid ${p.pid}` : '',
    p.ports ? Object.entries(p.ports).map(([role, port]) => `${role}:${port}`).join(' ') : '',
    troubled && (p.signal || p.exitCode !== undefined) ? `exit ${p.signal ?? p.exitCode}` : '',
    p.restarts > 0 ? `restarts ${p.restarts}` : '',
  ].filter(Boolean);
  const head = (
    <Line>
      <Text color={color}>{mark || spinner}</Text> <Text color={troubled ? color : undefined} bold={troubled}>{`${p.name.padEnd(width)} ${p.state.padEnd(10)}`}</Text>{' '}
      <Text dimColor>{details.join('  ')}</Text>
      {troubled && p.message ? <Text color={color}>{`  ${p.message}`}</Text> : null}
    </Line>
  );
  if (!troubled) return head;
  const tail = tailLines > 0 ? (p.logTail ?? []).slice(-tailLines) : [];
  return (
    <Box flexDirection="column">
      {head}
      {tail.map((line, i) => (
        <Line key={i}>
          <Text dimColor>{`    │ ${line}`}</Text>
        </Line>
      ))}
      {p.logFile ? (
        <Line>
          <Text dimColor>{`    log: ${p.logFile}`}</Text>
        </Line>
      ) : null}
    </Box>
  );
});

const barWidth = 24;

function ProgressLine({ progress: p, spinner, width }: { progress: ProgressView; spinner: string; width: number }): React.JSX.Element {
  if (p.total === undefined || p.total <= 0) {
    return (
      <Line>
        <Text color="cyan">{spinner}</Text> {p.label.padEnd(width)} <Text dimColor>{formatAmount(p.current, p.unit)}</Text>
      </Line>
    );
  }
  const fraction = Math.min(1, Math.max(0, p.current / p.total));
  const filled = Math.round(fraction * barWidth);
  const amounts = p.unit === 'bytes' ? `${formatAmount(p.current, p.unit)} / ${formatAmount(p.total, p.unit)}` : `${p.current}/${formatAmount(p.total, p.unit)}`;
  return (
    <Line>
      <Text color="cyan">{spinner}</Text> {p.label.padEnd(width)} <Text color="cyan">{'█'.repeat(filled)}</Text>
      <Text dimColor>{'░'.repeat(barWidth - filled)}</Text> {`${String(Math.floor(fraction * 100)).padStart(3)}%`} <Text dimColor>{amounts}</Text>
    </Line>
  );
}

const MoreObjects = memo(function MoreObjects({ count, notReady }: { count: number; notReady: number }) {
  return (
    <Line>
      <Text dimColor>{`… ${count} more object${count === 1 ? '' : 's'}${notReady ? ` (${notReady} not ready)` : ''}`}</Text>
    </Line>
  );
});

const ReadyGroup = memo(function ReadyGroup({ branch, count, objectKind }: { branch: string; count: number; objectKind: string }) {
  return (
    <Line>
      <Text dimColor>{branch}</Text>
      <Text color="green">✓</Text> <Text dimColor>{`${count} ${objectKind}s ready`}</Text>
    </Line>
  );
});

interface ObjectLineProps {
  object: ObjectView;
  branch: string;
  showNamespace: boolean;
  elapsed: string;
  /** Set when the blocking condition gets its own row: the tree lines drawn left of it. */
  blockingGutter: string | undefined;
}

const ObjectLine = memo(function ObjectLine({ object: o, branch, showNamespace, elapsed, blockingGutter }: ObjectLineProps) {
  const failed = o.phase === 'Failed';
  const b = o.blocking;
  const blocking = b ? `waiting on ${b.condition}${b.reason ? ` (${b.reason})` : ''}${b.message ? `: ${b.message}` : ''}` : undefined;
  const head = (
    <Line>
      <Text dimColor>{branch}</Text>
      {o.ready ? <Text color="green">✓</Text> : failed ? <Text color="red">✗</Text> : <Text color="yellow">○</Text>} <Text bold>{o.kind}</Text>
      {` ${showNamespace ? `${o.namespace}/` : ''}${o.name} `}
      <Text color={failed ? 'red' : o.ready ? 'green' : undefined}>{o.phase ?? (o.ready ? 'Ready' : 'Pending')}</Text> <Text dimColor>{elapsed}</Text>
      {blocking && blockingGutter === undefined ? <Text color="yellow">{`  ${blocking}`}</Text> : null}
    </Line>
  );
  if (!blocking || blockingGutter === undefined) return head;
  return (
    <Box flexDirection="column">
      {head}
      <Line>
        <Text dimColor>{blockingGutter}</Text>
        <Text color="yellow">{`  ${blocking}`}</Text>
      </Line>
    </Box>
  );
});

const LogLineView = memo(function LogLineView({ line: { level, text: full, repeats } }: { line: LogLine }) {
  // One row each: a multi-line message shows its first line.
  const newline = full.indexOf('\n');
  const text = `${repeats ? `(${repeats}×) ` : ''}${newline === -1 ? full : `${full.slice(0, newline)} …`}`;
  switch (level) {
    case 'error':
      return (
        <Line>
          <Text color="red">{`✗ ${text}`}</Text>
        </Line>
      );
    case 'warn':
      return (
        <Line>
          <Text color="yellow">{`⚠ ${text}`}</Text>
        </Line>
      );
    default:
      return (
        <Line>
          <Text dimColor>{text}</Text>
        </Line>
      );
  }
});

/**
 * The interactive form of `create install-config` (ink, on a TTY). It only collects
 * answers; the command hands them to the service. Each answer is checked as it is
 * entered, with the install config schema's own rules, so the service rarely refuses.
 */
import React, { useEffect, useReducer } from 'react';
import { Box, Text, render, useInput } from 'ink';
import { checkKubernetesVersion, clusterNameSchema, defaultKubernetesVersion, validateNode, type NewInstallConfigAnswers, type SchemaNode, type SchemaProblem } from '../../config/index.js';
import { allPlatformInputs, defaultPlatform, platformNamed, platforms } from '../../platforms/index.js';

/** A common answer's key (name, platform, kubernetesVersion, controlPlaneReplicas, workers), or a platform input's (`PlatformInput.key`). */
export type AnswerKey = string;

export interface Question {
  key: AnswerKey;
  label: string;
  kind: 'text' | 'number' | 'select';
  choices?: readonly { value: string; label: string }[];
  /** Pre-filled answer (Enter accepts it). */
  initial?: string;
  /** Empty answers allowed (optional fields). Default: false. */
  optional?: boolean;
  /** Returns the problem with a typed answer, or undefined. */
  validate?: (value: string) => string | undefined;
  /** Asked only when this holds for the answers so far. */
  when?: (answers: Partial<Record<AnswerKey, string>>) => boolean;
}

function nodeCheck(node: SchemaNode): (value: string) => string | undefined {
  return (value) => {
    const problems: SchemaProblem[] = [];
    validateNode(node, value, [], problems);
    const first = problems[0];
    return first ? `${first.message}${first.hint ? ` (${first.hint})` : ''}` : undefined;
  };
}

const integerCheck =
  (min: number, extra?: (n: number) => string | undefined) =>
  (value: string): string | undefined => {
    if (!/^\d+$/.test(value)) return 'enter a whole number';
    const n = Number(value);
    if (n < min) return `must be at least ${min}`;
    return extra?.(n);
  };

/** The questions of `create install-config`, with the flags' values as initial answers. */
export function installConfigQuestions(initial: Partial<Record<AnswerKey, string>>): Question[] {
  const withInitial = (q: Question): Question => (initial[q.key] !== undefined ? { ...q, initial: initial[q.key] } : q);
  const questions: Question[] = [
    { key: 'name', label: 'Cluster name', kind: 'text', validate: nodeCheck(clusterNameSchema) },
    {
      key: 'platform',
      label: 'Platform',
      kind: 'select',
      choices: platforms.map((p) => ({ value: p.name, label: `${p.name} — ${p.description}` })),
      initial: defaultPlatform.name,
    },
    { key: 'kubernetesVersion', label: 'Kubernetes version', kind: 'text', initial: defaultKubernetesVersion, validate: checkKubernetesVersion },
    {
      key: 'controlPlaneReplicas',
      label: 'Control-plane machines',
      kind: 'number',
      initial: '3',
      validate: integerCheck(1, (n) => (n % 2 === 0 ? 'use an odd number: etcd needs a majority (1, 3, 5)' : undefined)),
    },
    { key: 'workers', label: 'Worker machines (0: the control plane runs workloads)', kind: 'number', initial: '2', validate: integerCheck(0) },
    // Then the chosen platform's own questions.
    ...allPlatformInputs().map(({ input, platforms: askedBy }): Question => ({
      key: input.key,
      label: input.label,
      kind: 'text',
      when: (a) => askedBy.includes(a.platform ?? defaultPlatform.name),
      ...(input.initial !== undefined ? { initial: input.initial } : {}),
      ...(input.required ? {} : { optional: true }),
      ...(input.node ? { validate: nodeCheck(input.node) } : {}),
    })),
  ];
  return questions.map(withInitial);
}

/** Turns raw answers into the service's typed answers. */
export function toAnswers(raw: Partial<Record<AnswerKey, string>>): NewInstallConfigAnswers {
  const platform = platformNamed(raw.platform ?? defaultPlatform.name);
  // Only the chosen platform's answers, and only those given: an empty one leaves the field's default.
  const platformAnswers = Object.fromEntries(platform.inputs.flatMap((input) => (raw[input.key] ? [[input.key, raw[input.key]!]] : [])));
  return {
    name: raw.name ?? '',
    platform: platform.name,
    kubernetesVersion: raw.kubernetesVersion ?? defaultKubernetesVersion,
    controlPlaneReplicas: Number(raw.controlPlaneReplicas ?? 3),
    workers: Number(raw.workers ?? 2),
    platformAnswers,
  };
}

export interface InstallConfigPromptProps {
  questions: readonly Question[];
  /** Answers already given (flags, environment): their questions are skipped. */
  given: Partial<Record<AnswerKey, string>>;
  onSubmit(answers: Partial<Record<AnswerKey, string>>): void;
  onCancel(): void;
}

interface FormState {
  answers: Partial<Record<AnswerKey, string>>;
  input: string;
  selected: number;
  error?: string;
  outcome?: 'submitted' | 'cancelled';
}

type Keypress = { char: string; key: { return?: boolean; escape?: boolean; upArrow?: boolean; downArrow?: boolean; backspace?: boolean; delete?: boolean; ctrl?: boolean; meta?: boolean } };

function pendingQuestions(questions: readonly Question[], answers: Partial<Record<AnswerKey, string>>): Question[] {
  return questions.filter((q) => answers[q.key] === undefined && (q.when?.(answers) ?? true));
}

function initialSelection(question: Question | undefined): number {
  return Math.max(0, question?.choices?.findIndex((c) => c.value === question.initial) ?? 0);
}

/** Pure: each key press moves the form from one state to the next, so fast typing loses nothing. */
function step(questions: readonly Question[], state: FormState, { char, key }: Keypress): FormState {
  if (state.outcome) return state;
  const current = pendingQuestions(questions, state.answers)[0];
  if (!current) return state;
  if ((key.ctrl && char === 'c') || key.escape) return { ...state, outcome: 'cancelled' };
  const accept = (value: string): FormState => {
    const problem = value === '' && current.optional ? undefined : value === '' ? 'an answer is needed' : current.validate?.(value);
    if (problem) return { ...state, error: problem };
    const answers = { ...state.answers, [current.key]: value };
    const next = pendingQuestions(questions, answers)[0];
    return { answers, input: '', selected: initialSelection(next), ...(next ? {} : { outcome: 'submitted' as const }) };
  };
  if (current.kind === 'select') {
    const count = current.choices?.length ?? 1;
    if (key.upArrow) return { ...state, selected: (state.selected + count - 1) % count };
    if (key.downArrow) return { ...state, selected: (state.selected + 1) % count };
    if (key.return) return accept(current.choices?.[state.selected]?.value ?? '');
    return state;
  }
  if (key.return) return accept(state.input === '' ? (current.initial ?? '') : state.input);
  if (key.backspace || key.delete) return { ...state, input: state.input.slice(0, -1) };
  if (char && !key.ctrl && !key.meta) return { ...state, input: state.input + char };
  return state;
}

export function InstallConfigPrompt({ questions, given, onSubmit, onCancel }: InstallConfigPromptProps): React.JSX.Element {
  const [state, dispatch] = useReducer(
    (s: FormState, press: Keypress) => step(questions, s, press),
    undefined,
    (): FormState => ({ answers: given, input: '', selected: initialSelection(pendingQuestions(questions, given)[0]) }),
  );
  useInput((char, key) => dispatch({ char, key }));
  useEffect(() => {
    if (state.outcome === 'submitted') onSubmit(state.answers);
    if (state.outcome === 'cancelled') onCancel();
    // Fires once, when the outcome is reached; the callbacks are not dependencies on purpose.
  }, [state.outcome]);

  const { answers, input, selected, error } = state;
  const done = state.outcome !== undefined;
  const current = pendingQuestions(questions, answers)[0];
  const asked = questions.filter((q) => given[q.key] === undefined && answers[q.key] !== undefined);

  return (
    <Box flexDirection="column">
      {asked.map((q) => (
        <Text key={q.key}>
          <Text color="green">✔ </Text>
          {q.label}: <Text bold>{answers[q.key] === '' ? '(none)' : answers[q.key]}</Text>
        </Text>
      ))}
      {current && !done && current.kind === 'select' && (
        <Box flexDirection="column">
          <Text>
            <Text color="cyan">? </Text>
            {current.label} <Text dimColor>(↑/↓, Enter)</Text>
          </Text>
          {current.choices?.map((choice, index) => (
            <Text key={choice.value} {...(index === selected ? { color: 'cyan' } : {})}>
              {index === selected ? '❯ ' : '  '}
              {choice.label}
            </Text>
          ))}
        </Box>
      )}
      {current && !done && current.kind !== 'select' && (
        <Text>
          <Text color="cyan">? </Text>
          {current.label}
          {current.initial !== undefined ? <Text dimColor> ({current.initial})</Text> : null}: {input}
          <Text inverse> </Text>
        </Text>
      )}
      {error && <Text color="red">  {error}</Text>}
    </Box>
  );
}

export interface PromptIo {
  stdin: NodeJS.ReadStream;
  /** Where the form renders; stderr, so stdout keeps only results. */
  stdout: NodeJS.WriteStream;
}

/** True when a person can answer: both ends are terminals and the output is text. */
export function canPrompt(io: { stdin: { isTTY?: boolean }; stderr: { isTTY?: boolean } }, output: 'text' | 'json'): boolean {
  return output === 'text' && io.stdin.isTTY === true && io.stderr.isTTY === true;
}

/** Renders the form and resolves with every answer; rejects with `cancelled` on Ctrl-C or Esc. */
export async function promptInstallConfig(io: PromptIo, given: Partial<Record<AnswerKey, string>>, initial: Partial<Record<AnswerKey, string>>): Promise<Partial<Record<AnswerKey, string>>> {
  const questions = installConfigQuestions(initial);
  let settle: (outcome: Partial<Record<AnswerKey, string>> | undefined) => void = () => {};
  const finished = new Promise<Partial<Record<AnswerKey, string>> | undefined>((resolve) => (settle = resolve));
  const app = render(<InstallConfigPrompt questions={questions} given={given} onSubmit={(answers) => settle(answers)} onCancel={() => settle(undefined)} />, {
    stdin: io.stdin,
    stdout: io.stdout,
    exitOnCtrlC: false,
  });
  const answers = await finished;
  app.unmount();
  await app.waitUntilExit();
  if (!answers) throw new PromptCancelled();
  return answers;
}

export class PromptCancelled extends Error {
  constructor() {
    super('cancelled');
  }
}

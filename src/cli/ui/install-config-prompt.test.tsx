import React from 'react';
import { render } from 'ink-testing-library';
import { describe, expect, it, vi } from 'vitest';
import { InstallConfigPrompt, installConfigQuestions, toAnswers, type AnswerKey } from './install-config-prompt.js';

const tick = () => new Promise((resolve) => setTimeout(resolve, 30));
const enter = '\r';
const down = '\u001B[B';

async function type(stdin: { write(data: string): void }, text: string): Promise<void> {
  for (const char of text) {
    stdin.write(char);
    await tick();
  }
}

describe('InstallConfigPrompt', () => {
  it('asks each question, accepts defaults with Enter, and submits the answers', async () => {
    const onSubmit = vi.fn<(answers: Partial<Record<AnswerKey, string>>) => void>();
    const { stdin, lastFrame } = render(<InstallConfigPrompt questions={installConfigQuestions({})} given={{}} onSubmit={onSubmit} onCancel={() => {}} />);
    await tick();
    expect(lastFrame()).toContain('Cluster name');
    await type(stdin, 'demo');
    stdin.write(enter);
    await tick();
    expect(lastFrame()).toContain('✔ Cluster name: demo');
    expect(lastFrame()).toContain('❯ inmemory');
    // Fast typing: no pause between keys, nothing is lost.
    stdin.write(enter); // platform: inmemory
    stdin.write(enter); // Kubernetes version: default
    stdin.write(enter); // control-plane machines: 3
    stdin.write('5');
    stdin.write(enter); // workers: 5
    await vi.waitFor(() => expect(onSubmit).toHaveBeenCalledWith({ name: 'demo', platform: 'inmemory', kubernetesVersion: 'v1.36.3', controlPlaneReplicas: '3', workers: '5' }), { timeout: 2000 });
  });

  it('refuses an invalid answer with the schema\'s reason and asks again', async () => {
    const onSubmit = vi.fn();
    const { stdin, lastFrame } = render(<InstallConfigPrompt questions={installConfigQuestions({})} given={{ name: 'demo', platform: 'inmemory', kubernetesVersion: 'v1.36.3' }} onSubmit={onSubmit} onCancel={() => {}} />);
    await tick();
    await type(stdin, '4');
    stdin.write(enter);
    await tick();
    expect(lastFrame()).toContain('use an odd number');
    expect(lastFrame()).toContain('Control-plane machines');
    expect(onSubmit).not.toHaveBeenCalled();
  });

  it('asks the aws questions only for aws, skipping what flags gave', async () => {
    const onSubmit = vi.fn<(answers: Partial<Record<AnswerKey, string>>) => void>();
    const { stdin, lastFrame } = render(
      <InstallConfigPrompt questions={installConfigQuestions({})} given={{ name: 'demo', kubernetesVersion: 'v1.36.3', controlPlaneReplicas: '3', workers: '2' }} onSubmit={onSubmit} onCancel={() => {}} />,
    );
    await tick();
    stdin.write(down);
    await tick();
    expect(lastFrame()).toContain('❯ aws');
    stdin.write(enter);
    await tick();
    expect(lastFrame()).toContain('AWS region');
    await type(stdin, 'us-east-1');
    stdin.write(enter);
    await tick();
    stdin.write(enter); // instance type default
    await tick();
    stdin.write(enter); // no ssh key
    await tick();
    stdin.write(enter); // credentials default
    await vi.waitFor(() => expect(onSubmit).toHaveBeenCalled(), { timeout: 2000 });
    const answers = onSubmit.mock.calls[0]?.[0];
    expect(answers).toMatchObject({ platform: 'aws', region: 'us-east-1', instanceType: 't3.large', sshKeyName: '', credentialsFile: '~/.aws/credentials' });
    expect(toAnswers(answers ?? {})).toEqual({ name: 'demo', platform: 'aws', kubernetesVersion: 'v1.36.3', controlPlaneReplicas: 3, workers: 2, platformAnswers: { region: 'us-east-1', instanceType: 't3.large', credentialsFile: '~/.aws/credentials' } });
  });

  it('cancels on Escape', async () => {
    const onCancel = vi.fn();
    const { stdin } = render(<InstallConfigPrompt questions={installConfigQuestions({})} given={{}} onSubmit={() => {}} onCancel={onCancel} />);
    await tick();
    stdin.write('\u001B');
    await vi.waitFor(() => expect(onCancel).toHaveBeenCalled(), { timeout: 2000 });
  });
});

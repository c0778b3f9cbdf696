/**
 * The TTY renderer: a live ink view on stderr for long commands, results as plain
 * text on stdout. Events only update the model; frames are drawn on a fixed tick (at
 * most one per `frameMs`), so thousands of events a second cost one map update each
 * and ten frames. A frame is not cheap — ink lays out and re-renders the whole view,
 * 5 to 45 ms measured on a loaded 2-core machine — so frames are also spaced to at
 * least `costFactor` times what the last one took, and an idle view (only a spinner
 * and clocks moving) redraws every `animationMs`.
 *
 * The view mounts on the first event that has something live to show (a stage, a
 * process, an object, unfinished progress). Until then log lines print as plain lines,
 * so a short command looks as it does without a terminal, and an ink prompt running
 * before the first event (create install-config) has the terminal to itself.
 */
import React from 'react';
import { render } from 'ink';
import { atLeast, type EventSink, type LogLevel, type ProvisionerEvent } from '../../../events.js';
import { PlainRenderer, formatPlain, type Writer } from '../plain.js';
import { planFrame } from './layout.js';
import { LiveView } from './live-view.js';
import { LiveModel } from './model.js';
import { formatSummary } from './summary.js';

/** A mounted ink tree, as far as the renderer needs one. */
export interface LiveSurface {
  rerender(node: React.ReactElement): void;
  /** Erases the frame from the terminal. */
  clear(): void;
  unmount(): void;
}

/** Mounts a tree: ink's `render` on the terminal, ink-testing-library's in tests. */
export type Mount = (node: React.ReactElement) => LiveSurface;

export interface InkRendererOptions {
  /** Where results go. When it is a TTY too, the frame is cleared around each result. */
  stdout: Writer & { isTTY?: boolean };
  /** Where the summary, and log lines before the view mounts, go: the terminal ink draws on. */
  stderr: Writer;
  logLevel: LogLevel;
  mount: Mount;
  /** Terminal height, read at every frame. Default: 24. */
  rows?: () => number;
  /** Clock in ms. Default: performance.now. */
  now?: () => number;
  /** Shortest time between two frames. Default: 100 ms. */
  frameMs?: number;
  /**
   * Time between frames when nothing changed but something animates (a spinner, a
   * running clock); also the spinner's step. Default: 500 ms.
   */
  animationMs?: number;
}

/** Frames are at least this many times their own cost apart: rendering takes at most ~1/4 of a core. */
const costFactor = 4;

type LiveEvent = Extract<ProvisionerEvent, { type: 'stage' | 'process' | 'object' | 'progress' }>;

function startsLiveView(event: ProvisionerEvent): event is LiveEvent {
  return event.type === 'stage' || event.type === 'process' || event.type === 'object' || (event.type === 'progress' && !event.done);
}

export class InkRenderer implements EventSink {
  private readonly model: LiveModel;
  private readonly now: () => number;
  private readonly rows: () => number;
  private readonly frameMs: number;
  private readonly animationMs: number;
  private drawnAt = 0;
  /** Time the last frame took to render, in ms. */
  private drawCost = 0;
  private surface: LiveSurface | undefined;
  private ticker: NodeJS.Timeout | undefined;
  private drawnVersion = -1;
  /** Set once the view has been shown; the summary is printed only then. */
  private wasLive = false;
  /** After stop(): late events print as plain lines. */
  private fallback: PlainRenderer | undefined;
  /** Frames drawn so far, for tests and for the curious. */
  frames = 0;

  constructor(private readonly options: InkRendererOptions) {
    this.now = options.now ?? (() => performance.now());
    this.rows = options.rows ?? (() => 24);
    this.frameMs = options.frameMs ?? 100;
    this.animationMs = options.animationMs ?? 500;
    this.model = new LiveModel(options.logLevel, this.now);
  }

  emit(event: ProvisionerEvent): void {
    if (this.fallback) return this.fallback.emit(event);
    if (event.type === 'result') return this.writeResult(event.text.endsWith('\n') ? event.text : `${event.text}\n`);
    if (!this.surface && !startsLiveView(event)) {
      // Nothing live yet: logs (and finished progress) as plain lines, as without a terminal.
      if (event.type === 'log' && !atLeast(event.level, this.options.logLevel)) return;
      const line = formatPlain(event);
      if (line !== undefined) this.options.stderr.write(`${line}\n`);
      return;
    }
    this.model.apply(event);
    if (!this.surface) this.show();
  }

  /** Erases the view and prints the summary. Idempotent; later events print as plain lines. */
  stop(): void {
    if (this.fallback) return;
    this.hide();
    this.fallback = new PlainRenderer(this.options.stdout, this.options.stderr, this.options.logLevel);
    if (this.wasLive) {
      const summary = formatSummary(this.model, this.now());
      if (summary) this.options.stderr.write(summary);
    }
  }

  async close(): Promise<void> {
    this.stop();
  }

  private show(): void {
    this.surface = this.options.mount(this.view());
    this.wasLive = true;
    this.frames++;
    this.drawnVersion = this.model.version;
    this.drawnAt = this.now();
    this.ticker = setInterval(() => this.tick(), this.frameMs);
    // The view must never be what keeps the CLI alive.
    this.ticker.unref();
  }

  private hide(): void {
    if (this.ticker) clearInterval(this.ticker);
    this.ticker = undefined;
    if (!this.surface) return;
    // Erased, not redrawn first: the summary replaces it, and a redraw still pending in
    // ink's own throttle when clear() runs would be flushed back by unmount().
    this.surface.clear();
    this.surface.unmount();
    this.surface = undefined;
  }

  private tick(): void {
    // Half a tick of slack: interval timers fire a little early or late.
    const since = this.now() - this.drawnAt + this.frameMs / 2;
    if (since < this.drawCost * costFactor) return;
    if (this.model.version !== this.drawnVersion) this.draw();
    else if (since >= this.animationMs && this.model.animating) this.draw();
  }

  private draw(): void {
    if (!this.surface) return;
    this.drawnVersion = this.model.version;
    this.drawnAt = this.now();
    this.frames++;
    this.surface.rerender(this.view());
    this.drawCost = this.now() - this.drawnAt;
  }

  private view(): React.ReactElement {
    return <LiveView plan={planFrame(this.model, this.rows())} now={this.now()} spinnerMs={this.animationMs} />;
  }

  private writeResult(text: string): void {
    if (!this.surface || this.options.stdout.isTTY !== true) {
      this.options.stdout.write(text);
      return;
    }
    // stdout is the same terminal: a line written under the frame would be overwritten
    // by the next redraw, so the frame goes away, the result is printed, and a new
    // frame starts below it.
    this.hide();
    this.options.stdout.write(text);
    this.show();
  }
}

/** Mounts on a real terminal stream (stderr), leaving stdout to results. */
export function terminalMount(terminal: NodeJS.WriteStream): Mount {
  return (node) => {
    const instance = render(node, {
      stdout: terminal,
      stderr: terminal,
      // Nothing in provisioner uses console; if a dependency does, it must not draw into the frame's stdout.
      patchConsole: false,
      // No input is read; Ctrl-C stays a signal that main.ts turns into a clean stop.
      exitOnCtrlC: false,
    });
    return { rerender: instance.rerender, clear: instance.clear, unmount: instance.unmount };
  };
}

import type { RunRecord } from './run-types.js';

/*
 * How long a run took, in the one wording the CLI's summary and the dashboard share
 * (docs/architecture.md, "A run's life": a retry or resume starts a new pass). Active time and
 * wall time are said apart, so a 0.1 s run retried a day later reads "active 0.2 s · wall 1 d",
 * never "a day".
 */

export interface RunDurations {
  /** Every pass from its start to its end (the pass under way: to now). */
  activeMs: number;
  /** From the run's creation to its last end, or to now while a pass is under way. */
  wallMs: number;
  /** The last pass alone (the one under way, so far). */
  lastPassMs: number;
  /** Passes so far: 1, plus one per retry or resume. */
  passes: number;
  /** A pass is under way (the run is running or blocked): the figures run up to now. */
  ongoing: boolean;
}

export function runDurations(run: RunRecord, now = Date.now()): RunDurations {
  const created = Date.parse(run.createdAt);
  // finishedAt is removed whenever the run goes back to running or blocked (set_status).
  const ongoing = run.finishedAt === undefined;
  const end = ongoing ? now : Date.parse(run.finishedAt!);
  const lastPassMs = Math.max(0, end - Date.parse(run.passStartedAt ?? run.createdAt));
  return {
    activeMs: run.activeMs + lastPassMs,
    wallMs: Math.max(0, end - created),
    lastPassMs,
    passes: run.passes + 1,
    ongoing,
  };
}

/** `0.4 s`, `45 s`, `12 min 3 s`, `2 h 5 min`, `3 d 4 h`. */
export function formatDuration(ms: number): string {
  if (ms < 9950) return `${(Math.max(0, ms) / 1000).toFixed(1)} s`;
  const s = Math.round(ms / 1000);
  if (s < 60) return `${s} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min ${s % 60} s`;
  const h = Math.floor(m / 60);
  if (h < 48) return `${h} h ${m % 60} min`;
  return `${Math.floor(h / 24)} d ${h % 24} h`;
}

/**
 * The duration in short parts: one pass is one part (`took 0.4 s`, `12 s so far`); after a
 * retry or resume, active time, wall time and the passes apart (`active 0.5 s`, `wall 12 min`,
 * `2 passes (last 0.2 s)`). The dashboard's run list puts a part on each line.
 */
export function durationParts(run: RunRecord, now = Date.now()): string[] {
  const d = runDurations(run, now);
  const soFar = d.ongoing ? ' so far' : '';
  if (d.passes === 1)
    return [d.ongoing ? `${formatDuration(d.lastPassMs)} so far` : `took ${formatDuration(d.lastPassMs)}`];
  return [
    `active ${formatDuration(d.activeMs)}${soFar}`,
    `wall ${formatDuration(d.wallMs)}`,
    `${d.passes} passes (last ${formatDuration(d.lastPassMs)}${soFar})`,
  ];
}

/** The parts on one line: `active 0.5 s · wall 12 min · 2 passes (last 0.2 s)`. */
export function durationWords(run: RunRecord, now = Date.now()): string {
  return durationParts(run, now).join(' · ');
}

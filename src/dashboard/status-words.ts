import type { RunRecord } from '../runs/index.js';

/**
 * Rows that need someone to look at them: the CRM refused them, they never passed validation,
 * or a create may have been applied without a deal to show for it (uncertain).
 */
export function problemCount(run: RunRecord): number {
  return run.counts.failed + run.counts.invalid + run.counts.uncertain;
}

function plural(n: number, word: string): string {
  return `${n.toLocaleString('en-US')} ${word}${n === 1 ? '' : 's'}`;
}

/** Kind of status, for the colour of its badge. */
export type StatusTone = 'running' | 'blocked' | 'ok' | 'warn' | 'bad';

/**
 * A run's status in the words an operations person would use: a short `text` for the badge
 * (never more than a few words, so it stays on one line), a `detail` line under it (the problem
 * counts, or why the run failed or waits), the whole sentence for a tooltip, and the tone.
 */
export function statusWords(run: RunRecord): { text: string; tone: StatusTone; detail: string; sentence: string } {
  const dry = run.options.dryRun === true;
  switch (run.status) {
    case 'running':
      return {
        text: dry ? 'Dry run' : 'Running',
        tone: 'running',
        detail: '',
        sentence: dry ? 'Dry run in progress: rows are validated, nothing is sent' : 'Running',
      };
    case 'blocked':
      return {
        text: 'Blocked',
        tone: 'blocked',
        detail: 'API key refused',
        sentence: `Blocked — API key refused${run.reason ? `: ${run.reason}` : ''}`,
      };
    case 'failed': {
      const why = run.reason ?? (run.counts.total === 0 ? 'no rows were read' : 'no reason recorded');
      return { text: 'Failed', tone: 'bad', detail: shorten(why, 90), sentence: `Failed: ${why}` };
    }
    case 'cancelled': {
      const why = run.reason ?? 'cancelled by an operator';
      return { text: 'Cancelled', tone: 'warn', detail: shorten(why, 90), sentence: `Cancelled: ${why}` };
    }
    case 'completed': {
      const { failed, invalid, uncertain } = run.counts;
      if (failed === 0 && invalid === 0 && uncertain === 0) {
        return dry
          ? {
              text: 'Dry run',
              tone: 'ok',
              detail: 'all rows valid, nothing sent',
              sentence: 'Dry run completed: every row is valid; nothing was sent',
            }
          : { text: 'Completed', tone: 'ok', detail: '', sentence: 'Completed' };
      }
      const parts: string[] = [];
      if (failed > 0) parts.push(plural(failed, 'failed row'));
      if (invalid > 0) parts.push(plural(invalid, 'invalid row'));
      if (uncertain > 0) parts.push(plural(uncertain, 'uncertain create'));
      return {
        text: dry ? 'Dry run' : 'Completed',
        tone: 'warn',
        detail: parts.join(', '),
        sentence: `${dry ? 'Dry run completed' : 'Completed'} with ${parts.join(' and ')}`,
      };
    }
  }
}

function shorten(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}

/** Rows with a final result, out of the rows read so far (0..1); null while nothing is known. */
export function progress(run: RunRecord): number | null {
  const { total, queued } = run.counts;
  if (total === 0) return null;
  return Math.min(1, (total - queued) / total);
}

/**
 * How long the run's first pass took (from its start to when it first completed or failed), or
 * has taken so far: what the run itself cost, for /metrics' duration histogram. Retries later
 * move `finishedAt`, not this. Pages say durations through the run store's `durationParts`.
 */
export function runDurationMs(run: RunRecord, now = Date.now()): number {
  const start = Date.parse(run.createdAt);
  const firstEnd = run.firstFinishedAt ?? run.finishedAt;
  const end = firstEnd !== undefined ? Date.parse(firstEnd) : now;
  return Math.max(0, end - start);
}

/** `2026-11-23 03:55 UTC`: one fixed zone, so every operator reads the same time. */
export function formatTime(iso: string | undefined): string {
  if (iso === undefined) return '';
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return iso;
  return `${d.toISOString().slice(0, 16).replace('T', ' ')} UTC`;
}

/** `deal.update` → `Update deals`. */
export function operationWords(operation: RunRecord['operation']): string {
  const words: Record<RunRecord['operation'], string> = {
    'deal.create': 'Create deals',
    'deal.update': 'Update deals',
    'deal.upsert': 'Sync deals',
    'lead.update': 'Update leads',
    'contact.update': 'Update contacts',
    'team.invite': 'Invite team members',
  };
  return words[operation] ?? operation;
}

export interface LiveStats {
  /** Rows with a final result, in percent of the rows read; null while none are read. */
  percent: number | null;
  /** Final results per second, averaged since the start; null until there is one. */
  rowsPerSecond: number | null;
  /** Time left at that rate; null until the total is known (producer done) and a rate exists. */
  etaMs: number | null;
}

/**
 * Progress of a run in numbers. The rate is the average since the start of the first pass (no
 * per-row timing is kept); during a retry the counts mix passes, so no rate or ETA is claimed.
 */
export function liveStats(run: RunRecord, now = Date.now()): LiveStats {
  const p = progress(run);
  const percent = p === null ? null : Math.floor(p * 1000) / 10;
  if (run.firstFinishedAt !== undefined) return { percent, rowsPerSecond: null, etaMs: null };
  const done = run.counts.total - run.counts.queued;
  const seconds = (now - Date.parse(run.createdAt)) / 1000;
  const rowsPerSecond = done > 0 && seconds > 0 ? done / seconds : null;
  const etaMs = rowsPerSecond !== null && run.producerDone ? (run.counts.queued / rowsPerSecond) * 1000 : null;
  return { percent, rowsPerSecond, etaMs };
}

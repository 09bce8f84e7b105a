import { basename } from 'node:path';
import { operationEntry } from '../crm/index.js';
import { STDIN_SPOOL_DIR } from '../ingest/index.js';
import { FINAL_ROW_STATUSES, isProblem, type FinalRowStatus, type RunRecord } from '../runs/index.js';

/**
 * Rows that need someone to look at them: the CRM refused them, they never passed validation,
 * a create may have been applied without a deal to show for it (uncertain), or a cancel kept
 * them from being sent. The run store's own rule (isProblem), so the two never disagree.
 */
export function problemCount(run: RunRecord): number {
  return FINAL_ROW_STATUSES.filter(isProblem).reduce((sum, kind) => sum + run.counts[kind], 0);
}

export type CountTone = '' | 'ok' | 'warn' | 'bad';

/**
 * Each result kind the run store has, in the pages' words: a Record over FinalRowStatus, so a
 * kind added to the store does not compile until it has words here, and every page that shows
 * counts walks resultCounts() rather than naming kinds one by one.
 */
const KIND_WORDS: Record<FinalRowStatus, { label: string; tone: CountTone; tip: string }> = {
  succeeded: { label: 'Succeeded', tone: 'ok', tip: 'sent and applied by the CRM' },
  skipped: { label: 'Unchanged', tone: '', tip: 'the CRM already held these values: nothing was sent' },
  failed: { label: 'Failed', tone: 'bad', tip: 'the CRM refused them or could not be reached; retryable' },
  invalid: { label: 'Invalid', tone: 'bad', tip: 'refused before sending: correct the file, then upload it' },
  uncertain: { label: 'Uncertain', tone: 'bad', tip: 'a create that may have been applied; a retry looks first' },
  superseded: { label: 'Superseded', tone: '', tip: 'not sent: later rows already wrote every field it would change' },
  drifted: {
    label: 'Drifted',
    tone: 'warn',
    tip: 'not sent: the record changed since the plan (its before-values no longer held); re-plan to send',
  },
  cancelled: { label: 'Cancelled', tone: 'warn', tip: 'not sent because the run was cancelled; retryable' },
};

export interface KindCount {
  kind: FinalRowStatus;
  label: string;
  value: number;
  /** The tone of the count when it is not zero. */
  tone: CountTone;
  tip: string;
}

/** A kind's label on this run (a dry run's unchanged rows are the valid ones, none were sent). */
export function kindLabel(run: Pick<RunRecord, 'options'>, kind: FinalRowStatus): string {
  return kind === 'skipped' && run.options.dryRun === true ? 'Valid (not sent)' : KIND_WORDS[kind].label;
}

/** Every result kind of the run with its count, in the run store's order. */
export function resultCounts(run: RunRecord): KindCount[] {
  return FINAL_ROW_STATUSES.map((kind) => ({
    kind,
    label: kindLabel(run, kind),
    value: run.counts[kind],
    tone: KIND_WORDS[kind].tone,
    tip: KIND_WORDS[kind].tip,
  }));
}

/** `a`, `a and b`, `a, b and c`. */
export function andList(words: string[]): string {
  return words.length <= 1 ? (words[0] ?? '') : `${words.slice(0, -1).join(', ')} and ${words[words.length - 1]}`;
}

/** `1 failed and 1,650 cancelled` / `3 failed, 2 uncertain and 9 cancelled`: nonzero kinds only. */
export function kindsWords(parts: Array<{ label: string; value: number }>): string {
  return andList(
    parts.filter((p) => p.value > 0).map((p) => `${p.value.toLocaleString('en-US')} ${p.label.toLowerCase()}`),
  );
}

/** `1 workspace`, `2 workspaces`. */
export function plural(n: number, word: string): string {
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
      if (run.options.held !== undefined)
        return {
          text: 'Held',
          tone: 'warn',
          detail: 'held for approval · nothing sent',
          sentence: `Held for approval, nothing sent${run.reason ? `: ${run.reason}` : ''}`,
        };
      const { failed, invalid, uncertain } = run.counts;
      if (problemCount(run) === 0) {
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
      if (run.counts.cancelled > 0) parts.push(plural(run.counts.cancelled, 'cancelled row'));
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

/** `deal.update` → `Update deals` (the operation table's words). */
export function operationWords(operation: RunRecord['operation']): string {
  return (operationEntry(operation) as { words?: string } | undefined)?.words ?? operation;
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

/** `FROM "crm".deals d` → `crm.deals`: the first table a query reads, or undefined. */
export function firstTable(query: string): string | undefined {
  const m = /\bfrom\s+((?:"[^"]+"|[\w$]+)(?:\s*\.\s*(?:"[^"]+"|[\w$]+))*)/i.exec(query);
  return m?.[1]?.replace(/\s+/g, '').replace(/"/g, '');
}

/**
 * A run's short name for lists and headings: the name given at import (`--name`), the sync's
 * name, an applied plan's source (`Plan: renames.csv`), a query's first table, `stdin`
 * for piped rows (whose file is a spool the run reads from, not a name anyone gave), or the
 * file's base name. The whole source stays on the run page's sub-line.
 */
export function runLabel(run: Pick<RunRecord, 'source' | 'options' | 'syncName'>): string {
  if (run.options.label !== undefined) return run.options.label;
  if (run.syncName !== undefined) return `Nightly sync “${run.syncName}”`;
  if (run.options.plan !== undefined) {
    // `plan <id> (<the plan's source>)`: named by the plan's file, not by the whole line.
    const inner = /^plan \S+ \((.*)\)$/s.exec(run.source)?.[1];
    return `Plan: ${inner === undefined ? run.options.plan : /[\\/]/.test(inner) ? basename(inner) : inner}`;
  }
  if (run.options.query !== undefined) {
    const table = firstTable(run.options.query.query);
    return table !== undefined ? `PostgreSQL: ${table}` : 'PostgreSQL query';
  }
  const spooled = new RegExp(`(^|[\\\\/])${STDIN_SPOOL_DIR}[\\\\/]stdin-[^\\\\/]+$`).exec(run.source);
  if (spooled !== null) return `stdin (${run.options.format ?? 'csv'})`;
  return basename(run.source);
}

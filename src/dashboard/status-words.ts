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

/** A run's status in the words an operations person would use, and its tone. */
export function statusWords(run: RunRecord): { text: string; tone: StatusTone } {
  switch (run.status) {
    case 'running':
      return { text: 'Running', tone: 'running' };
    case 'blocked':
      return { text: 'Blocked — API key refused', tone: 'blocked' };
    case 'failed':
      return { text: 'Failed', tone: 'bad' };
    case 'cancelled':
      return { text: 'Cancelled', tone: 'warn' };
    case 'completed': {
      const { failed, invalid, uncertain } = run.counts;
      if (failed === 0 && invalid === 0 && uncertain === 0) return { text: 'Completed', tone: 'ok' };
      const parts: string[] = [];
      if (failed > 0) parts.push(plural(failed, 'failed row'));
      if (invalid > 0) parts.push(plural(invalid, 'invalid row'));
      if (uncertain > 0) parts.push(plural(uncertain, 'uncertain create'));
      return { text: `Completed with ${parts.join(' and ')}`, tone: 'warn' };
    }
  }
}

/** Rows with a final result, out of the rows read so far (0..1); null while nothing is known. */
export function progress(run: RunRecord): number | null {
  const { total, queued } = run.counts;
  if (total === 0) return null;
  return Math.min(1, (total - queued) / total);
}

/** `45 s`, `12 min 3 s`, `2 h 5 min`. */
export function formatDuration(ms: number): string {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 60) return `${s} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min ${s % 60} s`;
  const h = Math.floor(m / 60);
  if (h < 48) return `${h} h ${m % 60} min`;
  return `${Math.floor(h / 24)} d ${h % 24} h`;
}

/** How long the run took, or has taken so far while it is not finished. */
export function runDurationMs(run: RunRecord, now = Date.now()): number {
  const start = Date.parse(run.createdAt);
  const end = run.finishedAt !== undefined ? Date.parse(run.finishedAt) : now;
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

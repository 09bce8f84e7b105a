// What `crm-sync runs list` does: apart from the other runs actions because it needs only the run store.
import type { Command } from 'commander';
import { FINAL_ROW_STATUSES, plural, skippedWords, type RunRecord, type RunStatus } from '../runs/light.js';
import { withStore } from './context.js';

export interface RunsListOptions {
  status?: RunStatus;
  workspace?: string;
  sync?: string;
  limit: number;
  json?: boolean;
}

/**
 * `301 rows: 300 unchanged, 1 failed`: every result kind of the run store the run has (none left
 * out, so an all-unchanged sync does not read `0/301 ok`), and the rows still waiting. A dry run's
 * skipped rows are the ones it would send (`DRY RUN 2000 rows: 1993 would be sent, 7 invalid`); a
 * held tick's run has no rows of its own, its plan has the file's.
 */
export function countsWords(r: Pick<RunRecord, 'counts' | 'options'>): string {
  const c = r.counts;
  if (r.options.held !== undefined) {
    const plan = r.options.held.planId !== undefined ? ` in plan ${r.options.held.planId}` : '';
    return `held: ${plural(r.options.held.rows, 'row')} planned${plan}, nothing sent`;
  }
  const parts = FINAL_ROW_STATUSES.filter((k) => c[k] > 0).map(
    (k) => `${c[k].toLocaleString('en-US')} ${k === 'skipped' ? skippedWords(r) : k}`,
  );
  if (c.queued > 0) parts.push(`${c.queued.toLocaleString('en-US')} waiting`);
  return `${r.options.dryRun === true ? 'DRY RUN ' : ''}${plural(c.total, 'row')}${parts.length > 0 ? `: ${parts.join(', ')}` : ''}`;
}

/** The status column: a held tick completed having sent nothing, and says `held`. */
export function statusWord(r: Pick<RunRecord, 'status' | 'options'>): string {
  return r.options.held !== undefined && r.status === 'completed' ? 'held' : r.status;
}

function runLine(r: RunRecord): string {
  const line = [
    r.id,
    statusWord(r).padEnd(9),
    r.workspace,
    r.operation,
    r.syncName ?? '-',
    r.createdAt,
    countsWords(r),
  ].join('  ');
  // Blocked, failed and skipped-tick runs say why on the same line.
  return r.reason ? `${line}  (${r.reason})` : line;
}

/** `runs list`: the one runs command people type to look around, so it opens the run store only (no queues). */
export async function listRuns(opts: RunsListOptions, command: Command): Promise<void> {
  await withStore(command, async ({ store }) => {
    const { runs: list, total } = await store.listRuns({
      limit: opts.limit,
      ...(opts.status ? { status: opts.status } : {}),
      ...(opts.workspace ? { workspace: opts.workspace } : {}),
      ...(opts.sync ? { syncName: opts.sync } : {}),
    });
    if (opts.json) return void process.stdout.write(`${JSON.stringify({ total, runs: list }, null, 2)}\n`);
    if (list.length === 0) return void process.stdout.write('no runs\n');
    process.stdout.write(
      `${list.map(runLine).join('\n')}\n${list.length < total ? `(${list.length} of ${total}; --limit for more)\n` : ''}`,
    );
  });
}

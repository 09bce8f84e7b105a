// What `crm-sync runs list` does: apart from the other runs actions because it needs only the run store.
import type { Command } from 'commander';
import type { RunRecord, RunStatus } from '../runs/run-types.js';
import { withStore } from './context.js';

export interface RunsListOptions {
  status?: RunStatus;
  workspace?: string;
  sync?: string;
  limit: number;
  json?: boolean;
}

function runLine(r: RunRecord): string {
  const c = r.counts;
  const line = [
    r.id,
    r.status.padEnd(9),
    r.workspace,
    r.operation,
    r.syncName ?? '-',
    `${c.succeeded}/${c.total} ok`,
    `${c.failed} failed`,
    `${c.invalid} invalid`,
    `${c.skipped} skipped`,
    r.createdAt,
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

import { isEvictionReason } from '../redis/index.js';
import { workerCount } from '../queue/index.js';
import { durationWords, plural, skippedWords, type RunRecord, type RunStore } from '../runs/index.js';
import { EXIT, type ExitCode } from './exit-codes.js';
import { ignoredColumnsOf } from './source-notes.js';

/** The documented exit code for a run's outcome. */
export function exitCodeFor(run: RunRecord): ExitCode {
  // Ended or held by the workers because Redis evicts keys: its rows may be gone, not failed.
  if ((run.status === 'failed' || run.status === 'blocked') && isEvictionReason(run.reason))
    return EXIT.REDIS_DATA_LOST;
  if (run.status === 'blocked') return EXIT.BLOCKED;
  // A held tick sent nothing: a cron job must tell it from a tick that was done.
  if (run.status === 'completed' && run.options.held !== undefined) return EXIT.HELD;
  // Drifted rows need a person's decision (a new plan), like uncertain creates.
  // Uncertain creates need a person too (runs retry looks for their deals again); superseded rows
  // do not: their record holds a newer row's value, as the file meant.
  if (
    run.status === 'failed' ||
    run.status === 'cancelled' ||
    run.counts.failed > 0 ||
    run.counts.invalid > 0 ||
    run.counts.uncertain > 0 ||
    run.counts.drifted > 0 ||
    run.counts.cancelled > 0
  ) {
    return EXIT.ROWS_FAILED;
  }
  return EXIT.OK;
}

/**
 * A few plain lines a person can read at the end of a run. `heldPlan`: for a held tick's run,
 * what became of its plan since (heldPlanWords): its reason was written while the plan waited.
 */
export function formatRunSummary(run: RunRecord, heldPlan?: { state: string; words: string }): string {
  const c = run.counts;
  // A dry run records the rows it would send as skipped; it must never read as a real one.
  const dry = run.options.dryRun === true;
  const skipped = `${c.skipped} ${dry ? skippedWords(run) : 'skipped'}`;
  const held = run.options.held;
  const lines = [
    `${dry ? 'DRY RUN (nothing was sent) ' : ''}Run ${run.id}: ${run.operation} on ${run.workspace} from ${run.source}`,
    `  status: ${held !== undefined && run.status === 'completed' ? 'held' : run.status} · ${durationWords(run)}${statusReason(run, heldPlan)}`,
    held !== undefined
      ? `  rows: none of its own, nothing sent — held for approval: the source has ${plural(held.rows, 'data row')}${held.planId !== undefined ? `, planned in plan ${held.planId}` : ''}`
      : `  rows: ${c.total} total${c.total === 0 && run.producerDone ? ' (the file has 0 data rows)' : ''}, ${c.succeeded} succeeded, ${skipped}, ${c.failed} failed, ${c.invalid} invalid` +
        `${c.superseded ? `, ${c.superseded} superseded` : ''}${c.uncertain ? `, ${c.uncertain} uncertain` : ''}${c.drifted ? `, ${c.drifted} drifted` : ''}${c.cancelled ? `, ${c.cancelled} cancelled` : ''}` +
        `${c.queued ? `, ${c.queued} still queued` : ''}`,
  ];
  const ignored = ignoredColumnsOf(run);
  if (ignored.length > 0)
    lines.push(`  ignored columns (not sent): ${ignored.map((col) => JSON.stringify(col)).join(', ')}`);
  if (c.superseded > 0) lines.push(`  superseded rows were not sent: later rows wrote every field they would change`);
  if (c.uncertain > 0)
    lines.push(
      `  uncertain creates may have made a deal; "crm-sync runs retry ${run.id}" looks for them again, never re-sending blindly`,
    );
  if (c.failed + c.invalid > 0) lines.push(`  failed and invalid rows: crm-sync runs export ${run.id} --failed`);
  if (c.drifted > 0)
    lines.push(
      `  drifted rows were not sent: their records changed since the plan (runs show ${run.id} names the CRM's values); make a new plan for them: crm-sync plan <file> …`,
    );
  if (c.cancelled > 0) lines.push(`  cancelled rows were not sent: "crm-sync runs retry ${run.id}" sends them`);
  if (run.status === 'blocked' && isEvictionReason(run.reason))
    lines.push(
      `  the workers take it up again by themselves once Redis evicts no keys (maxmemory-policy noeviction); follow it with: crm-sync runs show ${run.id}`,
    );
  else if (run.status === 'blocked') lines.push(`  after fixing the API key: crm-sync runs resume ${run.id}`);
  return lines.join('\n');
}

/** ` (why)`: the run's reason, or for a held tick whose plan has moved on since, what became of it. */
function statusReason(run: RunRecord, heldPlan?: { state: string; words: string }): string {
  if (heldPlan !== undefined && heldPlan.state !== 'pending' && heldPlan.state !== 'approved')
    return ` (held for approval; since then ${heldPlan.words})`;
  return run.reason ? ` (${run.reason})` : '';
}

/**
 * Says plainly, on stderr, when no worker process serves the workspace (PoolPresence): queued
 * rows would wait forever without one. Answers whether any worker was seen.
 */
export async function warnIfNoWorkers(store: RunStore, workspace: string): Promise<boolean> {
  const workers = await workerCount(store.redis, store.prefix, workspace).catch(() => -1);
  if (workers !== 0) return true;
  process.stderr.write(
    `no worker serves workspace ${workspace}'s queue: its rows wait until one starts. ` +
      `Start one with "crm-sync worker -w ${workspace}", or run this command with --work.\n`,
  );
  return false;
}

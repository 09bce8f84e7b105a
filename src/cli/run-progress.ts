import { DEFAULTS } from '../config/index.js';
import { setTimeout as sleep } from 'node:timers/promises';
import cliProgress from 'cli-progress';
import { CrmSyncError, errorMessage, isCrmSyncError } from '../errors/index.js';
import { isEvictionReason } from '../redis/index.js';
import { workerCount } from '../queue/index.js';
import { durationWords, plural, runReads, skippedWords, type RunRecord, type RunStore } from '../runs/index.js';
import { EXIT, type ExitCode } from './exit-codes.js';
import type { QueuePresenceWatch } from './queue-presence.js';
import type { RedisHealthWatch } from './redis-health-watch.js';
import { RunGoneError } from './run-gone.js';
import { ignoredColumnsOf } from './source-notes.js';

export interface FollowRunOptions {
  /** Draw a progress bar (TTY) instead of periodic plain lines. Default: stderr is a TTY. */
  tty?: boolean;
  /** Plain-line interval when not a TTY. Default DEFAULTS.cli.progressLineEveryMs (5000 ms). */
  lineEveryMs?: number;
  /**
   * No progress while waiting (`--json`: stdout stays one JSON document). What keeps the rows
   * waiting (`presence`, `health`) is still said on stderr: silence there would look like work.
   */
  quiet?: boolean;
  /** Ride out Redis not answering this long, then give up with REDIS_LOST. Default 60000 ms. */
  redisOutageMs?: number;
  /** Say what keeps rows waiting (no worker, a pause, the circuit breaker), looked at every 5 s. */
  presence?: QueuePresenceWatch;
  /** Say when Redis keeps the rows waiting (full, or evicting keys), looked at with `presence`. */
  health?: RedisHealthWatch;
}

const done = (r: RunRecord) => r.counts.total - r.counts.queued;

/**
 * Waits until the run is no longer running, showing rows/s, counts and an ETA on stderr.
 * Returns the run as it ended (completed, failed or blocked).
 */
export async function followRun(store: RunStore, runId: string, options: FollowRunOptions = {}): Promise<RunRecord> {
  const tty = options.tty ?? Boolean(process.stderr.isTTY);
  const lineEveryMs = options.lineEveryMs ?? DEFAULTS.cli.progressLineEveryMs;
  const started = Date.now();
  let run = await store.requireRun(runId);
  const read = redisTolerantReader(store, runId, options.redisOutageMs ?? DEFAULT_REDIS_OUTAGE_MS);
  const startDone = done(run);
  const bar =
    !options.quiet && tty
      ? new cliProgress.SingleBar(
          {
            stream: process.stderr,
            hideCursor: true,
            format:
              ' {bar} {percentage}% | {value}/{total} rows | {succeeded} ok, {failed} failed, {invalid} invalid | {rate} rows/s | ETA {eta_formatted}',
          },
          cliProgress.Presets.shades_classic,
        )
      : null;
  bar?.start(Math.max(run.counts.total, 1), done(run), payload(run, 0));
  let lastLine = Date.now();
  let lastLook = 0;
  const reads = runReads(store, runId, { read: async (last) => (last ? ((await read(last)) ?? last) : run) });
  for await (run of reads) {
    if (options.presence && Date.now() - lastLook >= PRESENCE_EVERY_MS) {
      lastLook = Date.now();
      const line = await options.presence.look().catch(() => undefined);
      if (line !== undefined) process.stderr.write(`${bar ? '\n' : ''}${line}\n`);
      const redisLine = await options.health?.look().catch(() => undefined);
      if (redisLine !== undefined) process.stderr.write(`${bar ? '\n' : ''}${redisLine}\n`);
      // Evicted keys may be this run's queued rows, results or index entries: it may never end
      // (it stayed "running" at 6,350 of 12,000 for good). Workers that can still find it end it too.
      const evicted = options.health?.evicted;
      if (evicted) {
        bar?.stop();
        throw new RunGoneError({
          runId,
          lastSeen: run,
          lastSeenAt: new Date(),
          cause: { kind: 'evicted', policy: evicted.policy, evictedKeys: evicted.evictedKeys },
        });
      }
    }
    const rate = ((done(run) - startDone) / Math.max(1, Date.now() - started)) * 1000;
    if (bar) {
      bar.setTotal(Math.max(run.counts.total, 1));
      bar.update(done(run), payload(run, rate));
    } else if (!options.quiet && Date.now() - lastLine >= lineEveryMs) {
      lastLine = Date.now();
      process.stderr.write(
        `run ${run.id}: ${done(run)}/${run.counts.total}${run.producerDone ? '' : '+'} rows done ` +
          `(${run.counts.succeeded} succeeded, ${run.counts.failed} failed, ${run.counts.invalid} invalid, ${run.counts.skipped} skipped), ${rate.toFixed(0)} rows/s\n`,
      );
    }
  }
  // A cancel ends the run at once; its rows in flight land after: the summary waits for them.
  run = await settledRun(store, run, { read: async (last) => (await read(last)) ?? last });
  const average = ((done(run) - startDone) / Math.max(1, Date.now() - started)) * 1000;
  bar?.update(done(run), payload(run, average));
  bar?.stop();
  return run;
}

/** Longest wait for the rows of a run that just ended to land (settledRun). */
export const SETTLE_WAIT_MS = DEFAULTS.cli.settleWaitMs;

const isSettled = (r: RunRecord) =>
  r.status === 'running' ||
  r.status === 'blocked' ||
  (r.counts.queued === 0 && (r.status !== 'cancelled' || r.producerDone));

/**
 * A run's status changes the moment it is cancelled, but its rows land after: requests already
 * on the wire finish, rows the workers hold are recorded cancelled at their next request, and
 * the producer records the rows it still holds as it stops. Waits (up to `timeoutMs`) until no
 * row is queued and a cancelled run's producer is done, so a summary printed from the answer is
 * the run's final count rather than the moment the status changed. A running or blocked run is
 * returned as it is.
 */
export async function settledRun(
  store: RunStore,
  run: RunRecord,
  o: { timeoutMs?: number; read?: (last: RunRecord) => Promise<RunRecord> } = {},
): Promise<RunRecord> {
  const read = o.read ?? (() => store.requireRun(run.id));
  const deadline = Date.now() + (o.timeoutMs ?? SETTLE_WAIT_MS);
  let last = run;
  while (!isSettled(last) && Date.now() < deadline) {
    await sleep(100);
    last = await read(last);
  }
  return last;
}

const PRESENCE_EVERY_MS = 5000;

/** How long followRun rides out a Redis that does not answer. */
export const DEFAULT_REDIS_OUTAGE_MS = DEFAULTS.producer.redisOutageMs;

/**
 * Reads the run, riding out Redis outages (a restart, a partition) up to `outageMs`: the run
 * goes on in the workers meanwhile, so following it is no reason to fail. Past the bound it
 * throws REDIS_LOST, saying where the run stood. Answers undefined while Redis is away.
 */
function redisTolerantReader(
  store: RunStore,
  runId: string,
  outageMs: number,
): (last: RunRecord) => Promise<RunRecord | undefined> {
  let since: number | undefined;
  let lastSeenAt = new Date();
  return async (last) => {
    try {
      const run = await store.requireRun(runId);
      lastSeenAt = new Date();
      if (since !== undefined)
        process.stderr.write(
          `Redis answers again after ${((Date.now() - since) / 1000).toFixed(0)} s; following run ${runId}\n`,
        );
      since = undefined;
      return run;
    } catch (err) {
      // Never "rows not yet done were not sent": they may have been (a create that reached the
      // CRM and lost its result with Redis). The caller that produced the run says it better.
      if (isCrmSyncError(err) && err.code === 'RUN_NOT_FOUND')
        throw new RunGoneError({ runId, lastSeen: last, lastSeenAt, cause: { kind: 'unknown' } });
      if (since === undefined) {
        since = Date.now();
        process.stderr.write(
          `Redis does not answer (${errorMessage(err)}); still following run ${runId} for up to ${outageMs / 1000} s\n`,
        );
      } else if (Date.now() - since > outageMs) {
        throw new CrmSyncError(
          'REDIS_LOST',
          `Redis did not answer for ${((Date.now() - since) / 1000).toFixed(0)} s while following run ${runId} ` +
            `(last seen ${last.status}, ${done(last)}/${last.counts.total} rows done). The run is not stopped by this: ` +
            `workers go on once they reach Redis. Look again with: crm-sync runs show ${runId}`,
          { cause: err },
        );
      }
      return undefined;
    }
  };
}

function payload(run: RunRecord, rate: number) {
  return {
    succeeded: run.counts.succeeded,
    failed: run.counts.failed,
    invalid: run.counts.invalid,
    rate: rate.toFixed(0),
  };
}

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

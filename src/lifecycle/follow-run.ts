import { setTimeout as sleep } from 'node:timers/promises';
import cliProgress from 'cli-progress';
import { DEFAULTS } from '../config/index.js';
import { CrmSyncError, errorMessage, isCrmSyncError } from '../errors/index.js';
import { runReads, type RunRecord, type RunStore } from '../runs/index.js';
import { RunGoneError } from './run-gone.js';

/** Says what keeps a run's rows waiting, or undefined when nothing does (the CLI's QueuePresenceWatch). */
export interface WaitWatch {
  look(): Promise<string | undefined>;
}

/** A WaitWatch of Redis itself (the CLI's RedisHealthWatch): set `evicted` once Redis evicted keys since it began. */
export interface RedisWaitWatch extends WaitWatch {
  readonly evicted: { policy: string; evictedKeys: number } | undefined;
}

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
  presence?: WaitWatch;
  /** Say when Redis keeps the rows waiting (full, or evicting keys), looked at with `presence`. */
  health?: RedisWaitWatch;
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

import { DEFAULTS } from '../config/index.js';
import { CrmSyncError, errorMessage } from '../errors/index.js';
import { silentLogger, type Logger } from '../log/index.js';
import type { RunRecord, RunStore } from '../runs/index.js';
import { exitedProducer, PRODUCER_HEARTBEAT_MS, producerIdentity } from './producer-heartbeat.js';
import type { ProducerProgress } from './producer.js';
import { isEvictionReason, rideOutRedis } from '../redis/index.js';
import type { RunStop } from './stop-run.js';
import { WorkBoard } from '../queue/index.js';

/**
 * What a run's producer does when its work throws. `fail-run`: rows after the failure were
 * never read, so the run is failed with the reason (an import, a resume, a reconcile).
 * `finish-run`: every row of the run already has a result or a place in the queue (a retry:
 * rows it had not reached keep their earlier result), so the run is marked producer-done and
 * completes as its queued rows do.
 */
export type WhenProducingFails = 'fail-run' | 'finish-run';

export interface RunLifeOptions {
  store: RunStore;
  /** Creates the run, or takes an existing one back into production (a retry, a resume). */
  start: () => Promise<RunRecord>;
  /**
   * Produces the run's rows. The signal is aborted, with a RunStop as its reason, when the
   * run is cancelled (seen in the run's status) or `signal` below aborts.
   */
  produce: (run: RunRecord, signal: AbortSignal) => Promise<ProducerProgress>;
  /** The source's columns, recorded when producing ends either way. Default: none recorded. */
  columns?: () => string[];
  /** Default `fail-run`. */
  whenProducingFails?: WhenProducingFails;
  /** A stop decided by the caller (a nightly sync's maxFailures); its reason is a RunStop. Default none. */
  signal?: AbortSignal;
  /**
   * How often the producer renews its sign of life and looks at the run's status (a cancel
   * from another process is seen within this). Default DEFAULTS.producer (500 ms): one small script call, and a
   * resume is never taken for a silent producer even by a sweep set to a second.
   */
  watchMs?: number;
  logger?: Logger;
}

/**
 * The one owner of a run's life: start → produce → finish or fail. Every way a run is produced
 * (import, reconcile, nightly sync, retry, resume) goes through here, so no exception leaves a
 * run `running` with no producer: the run is failed with the reason (or, for a retry, finished)
 * before the error propagates. While it produces, the run's status is watched, so a cancel
 * from any process stops the producer through one AbortSignal.
 */
export async function runLife(options: RunLifeOptions): Promise<{ run: RunRecord; progress: ProducerProgress }> {
  const { store } = options;
  const logger = options.logger ?? silentLogger;
  const run = await options.start();
  // Who produces it: a resume after this process exits need not wait out its silence.
  await store.setProducer(run.id, producerIdentity()).catch(() => undefined);
  // A worker for the workspace from now on, not from the first queued job: a producer that dies
  // before queueing anything leaves a running run only a worker's sweep fails (WorkBoard).
  await new WorkBoard({ redis: store.redis, prefix: store.prefix }).signal(run.workspace);
  const stop = new AbortController();
  const signal = options.signal ? AbortSignal.any([stop.signal, options.signal]) : stop.signal;
  const watch = watchRun(
    store,
    run.id,
    stop,
    Math.min(options.watchMs ?? DEFAULTS.producer.watchMs, PRODUCER_HEARTBEAT_MS),
  );
  let progress: ProducerProgress;
  try {
    progress = await options.produce(run, signal);
  } catch (err) {
    watch();
    await endAfterFailure(store, run.id, options, err);
    // Said at once, so "runs resume" works right after this process exits. Bounded: Redis may be
    // what failed (then the resume tells this process is gone by its pid, on this host).
    await Promise.race([
      store.setProducer(run.id, exitedProducer()).catch(() => undefined),
      new Promise((resolve) => setTimeout(resolve, 2000).unref()),
    ]);
    throw err;
  }
  watch();
  return { run: await finishRun(store, run.id, options.columns?.() ?? [], logger), progress };
}

/** Renews producerSeenAt and aborts `stop` once the run is cancelled; returns the stop function. */
function watchRun(store: RunStore, runId: string, stop: AbortController, everyMs: number): () => void {
  const timer = setInterval(() => {
    store
      .touchProducer(runId)
      .then(async (status) => {
        if (status !== 'cancelled' || stop.signal.aborted) return;
        const reason = (await store.getRun(runId))?.reason ?? 'cancelled';
        stop.abort({ kind: 'cancelled', reason } satisfies RunStop);
      })
      .catch(() => {
        // A missed beat is harmless: a run is only failed after many (PRODUCER_SILENCE_MS).
      });
  }, everyMs);
  timer.unref();
  return () => clearInterval(timer);
}

async function endAfterFailure(store: RunStore, runId: string, options: RunLifeOptions, err: unknown): Promise<void> {
  // Best effort: when Redis is what failed, the workers' sweep fails the run later instead.
  const columns = options.columns?.() ?? [];
  if (columns.length > 0) await store.setColumns(runId, columns).catch(() => undefined);
  if ((options.whenProducingFails ?? 'fail-run') === 'finish-run') {
    await store.finishProducing(runId).catch(() => undefined);
    return;
  }
  // A cancelled run stays cancelled (its producer may fail on the way out); a run failed because
  // Redis evicted keys keeps that reason (REDIS_EVICTS): it is what stops its rows being sent.
  const now = await store.getRun(runId).catch(() => null);
  if (now?.status === 'cancelled' || (now?.status === 'failed' && isEvictionReason(now.reason))) return;
  await store.setStatus(runId, 'failed', errorMessage(err)).catch(() => undefined);
}

/** The producer's last steps, which a Redis restart must not turn into a failed run. */
export async function finishRun(
  store: RunStore,
  runId: string,
  columns: string[],
  logger: Logger = silentLogger,
): Promise<RunRecord> {
  const giveUp = (waited: number, last: unknown) =>
    new CrmSyncError(
      'REDIS_LOST',
      `Redis did not answer for ${Math.round(waited / 1000)} s as run ${runId} finished reading; resume it with: crm-sync runs resume ${runId}`,
      { cause: last },
    );
  if (columns.length > 0) await rideOutRedis(() => store.setColumns(runId, columns), { logger, giveUp });
  return rideOutRedis(() => store.finishProducing(runId), { logger, giveUp });
}

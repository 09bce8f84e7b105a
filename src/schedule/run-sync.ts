import { createWriteStream, mkdirSync } from 'node:fs';
import { finished } from 'node:stream/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import got from 'got';
import type { CrmClient } from '../crm/index.js';
import { errorMessage } from '../errors/index.js';
import { readMappingFile } from '../ingest/index.js';
import { reconcileImport, type PlanCounts } from '../reconcile/index.js';
import { writeResultsCsv, type RunCounts, type RunRecord, type RunStatus } from '../runs/index.js';
import { createCrmClient, type Runtime } from '../runtime/index.js';
import { abortRun } from './abort-run.js';
import { resolvePath, resolveSource, type SyncDefinition } from './sync-definition.js';
import { SyncLock } from './sync-lock.js';

export interface RunSyncOptions {
  runtime: Runtime;
  /** Default: a client for the definition's workspace, closed at the end. */
  client?: CrmClient;
  /** How often the run is checked while it goes. Default 500 ms. */
  pollMs?: number;
  /** Lifetime of the per-sync lock, renewed while the sync runs. Default 60 000 ms. */
  lockTtlMs?: number;
  /** Timeout of the notify POST. Default 10 000 ms. */
  notifyTimeoutMs?: number;
}

/** What a sync reports when it ends (to the log, and as JSON to the notify URL). */
export interface SyncSummary {
  sync: string;
  workspace: string;
  operation: string;
  runId: string;
  status: RunStatus;
  /** True when the tick was skipped because the previous run was still going. */
  skipped: boolean;
  reason?: string;
  source: string;
  counts: RunCounts;
  /** What reconcile decided per row (absent for a skipped tick). */
  plan?: PlanCounts;
  startedAt: string;
  finishedAt: string;
  durationMs: number;
  /** CSV of the failed and invalid rows, when there are any. */
  failedRowsFile?: string;
  dryRun: boolean;
}

/**
 * One tick of a sync: never alongside another run of the same sync (skipped and recorded as a
 * completed run whose reason says so), otherwise a reconciled run that is followed to its end
 * (aborted once `maxFailures` rows failed), then summarised to the log and the notify URL.
 */
export async function runSync(def: SyncDefinition, options: RunSyncOptions): Promise<SyncSummary> {
  const { runtime } = options;
  const { store, logger, config } = runtime;
  const log = logger.child({ sync: def.name });
  const started = new Date();
  const lock = new SyncLock(runtime.redis, config.prefix, def.name, options.lockTtlMs);
  const previous = (await store.listRuns({ syncName: def.name, status: 'running', limit: 1 })).runs[0];
  if (!(await lock.acquire())) return finish(def, options, await recordSkip(def, runtime, 'a tick of this sync is still being handled'), started, true);
  let client: CrmClient | undefined;
  try {
    if (previous) {
      if (previous.producerDone) {
        return await finish(def, options, await recordSkip(def, runtime, `previous run ${previous.id} still running`), started, true);
      }
      // The lock was free, so whoever produced that run is gone: it will never finish producing.
      await store.setStatus(previous.id, 'failed', 'its producer stopped before reading the whole file');
    }
    const source = resolveSource(def);
    const mapping = def.mapping !== undefined ? readMappingFile(resolvePath(def, def.mapping)) : undefined;
    client = options.client ?? createCrmClient(config, def.workspace, logger);
    const max = def.options.maxFailures;
    let aborted = false;
    let watching: Promise<void> | undefined;
    const queue = runtime.queue(def.workspace);
    const abort = async (runId: string, failed: number) => {
      if (aborted) return;
      aborted = true;
      const reason = `aborted: ${failed} rows failed (maxFailures ${max ?? 0})`;
      const removed = await abortRun(store, queue, runId, reason);
      log.warn({ runId, failed, removed }, 'sync run aborted: too many failed rows');
    };
    const watch = async (runId: string) => {
      for (;;) {
        const run = await store.requireRun(runId);
        if (max !== undefined && run.counts.failed >= max && !aborted) await abort(runId, run.counts.failed);
        if (run.status !== 'running' || aborted) return;
        await sleep(options.pollMs ?? 500);
      }
    };
    const result = await reconcileImport({
      file: source,
      op: def.operation,
      workspace: def.workspace,
      client,
      queue,
      store,
      syncName: def.name,
      logger: log,
      dryRun: def.options.dryRun,
      ...(def.matchKey !== undefined ? { matchKey: def.matchKey } : {}),
      ...(def.keyColumn !== undefined ? { keyColumn: def.keyColumn } : {}),
      ...(mapping ? { mapping } : {}),
      shouldStop: (plan) => aborted || (max !== undefined && plan['not-found'] + plan.ambiguous >= max),
      onRun: (run) => {
        log.info({ runId: run.id, source }, 'sync run started');
        watching = watch(run.id);
      },
    });
    await watching;
    let run = await store.requireRun(result.run.id);
    if (max !== undefined && run.counts.failed >= max && !aborted) await abort(run.id, run.counts.failed);
    run = await store.requireRun(result.run.id);
    return await finish(def, options, run, started, false, result.counts);
  } finally {
    if (client && !options.client) client.close();
    await lock.release();
  }
}

async function recordSkip(def: SyncDefinition, runtime: Runtime, why: string): Promise<RunRecord> {
  const run = await runtime.store.createRun({
    workspace: def.workspace,
    operation: def.operation,
    source: def.source,
    syncName: def.name,
    status: 'completed',
    options: { reconcile: true, ...(def.matchKey ? { matchKey: def.matchKey } : {}) },
  });
  await runtime.store.setStatus(run.id, 'completed', `skipped: ${why}`);
  return runtime.store.finishProducing(run.id);
}

async function finish(def: SyncDefinition, options: RunSyncOptions, run: RunRecord, started: Date, skipped: boolean, plan?: PlanCounts): Promise<SyncSummary> {
  const { store, config, logger } = options.runtime;
  const finishedAt = new Date();
  const summary: SyncSummary = {
    sync: def.name,
    workspace: def.workspace,
    operation: def.operation,
    runId: run.id,
    status: run.status,
    skipped,
    ...(run.reason ? { reason: run.reason } : {}),
    source: run.source,
    counts: run.counts,
    ...(plan ? { plan } : {}),
    startedAt: started.toISOString(),
    finishedAt: finishedAt.toISOString(),
    durationMs: finishedAt.getTime() - started.getTime(),
    dryRun: def.options.dryRun,
  };
  if (run.counts.failed + run.counts.invalid > 0) {
    try {
      mkdirSync(config.resultsDir, { recursive: true });
      const path = join(config.resultsDir, `${def.name}-${run.id}-failed.csv`);
      const out = createWriteStream(path);
      await writeResultsCsv(store, run.id, out, { problemsOnly: true });
      out.end();
      await finished(out);
      summary.failedRowsFile = path;
    } catch (err) {
      logger.warn({ sync: def.name, runId: run.id, err: errorMessage(err) }, 'could not write the failed-rows file');
    }
  }
  logger.info({ summary }, `sync ${def.name} ${skipped ? 'skipped' : 'finished'}: run ${run.id} ${run.status}`);
  if (def.options.notifyUrl) {
    try {
      await got.post(def.options.notifyUrl, { json: summary, timeout: { request: options.notifyTimeoutMs ?? 10_000 }, retry: { limit: 2, methods: ['POST'] } });
    } catch (err) {
      // A webhook that is down must not fail the sync; the summary is in the log either way.
      logger.warn({ sync: def.name, err: errorMessage(err) }, 'notify webhook failed');
    }
  }
  return summary;
}

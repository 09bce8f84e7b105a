import { isRunOnly, runShape } from '../crm/index.js';
import type { Operation } from '../crm/index.js';
import { DEFAULTS } from '../config/index.js';
import { CrmSyncError } from '../errors/index.js';
import { isEvictionReason } from '../redis/index.js';
import {
  ingest,
  parseMapping,
  reopenSource,
  resumeRefusal,
  sourceChange,
  type IngestedRow,
  type LoadReferences,
} from '../ingest/index.js';
import { silentLogger, type Logger } from '../log/index.js';
import type { RunRecord, RunStore } from '../runs/index.js';
import { PRODUCER_SILENCE_MS, producerGone } from './producer-heartbeat.js';
import { runLife } from './run-life.js';
import { produceRun, type ProducerProgress } from './producer.js';
import type { WorkspaceQueue } from '../queue/index.js';

export interface ResumeProducerOptions {
  runId: string;
  queue: WorkspaceQueue;
  store: RunStore;
  logger?: Logger;
  /** Where the run mapping's names resolve from. Default: such a run is refused. */
  loadReferences?: LoadReferences;
  /** As the producer's. Default DEFAULTS.producer (10,000 rows). */
  highWaterMark?: number;
  /** As the producer's. Default DEFAULTS.producer (60000 ms). */
  redisOutageMs?: number;
}

/** Rows below the resume point are looked up in the store this many at a time. */
const LOOKUP_CHUNK = 500;

/**
 * Goes on with a file-based run whose producer stopped mid-file (its process was killed, or
 * Redis was away longer than it would wait): the file is read again, rows the first producer
 * handed to the queue or recorded are passed over, and the rest are produced as the first
 * producer would have. Rows up to its last queued row that have no result yet are queued again
 * without being counted again (a job may have been counted and then lost with the process); a
 * row that is in two jobs is still sent at most once per the write fence.
 */
export async function resumeProducer(
  options: ResumeProducerOptions,
): Promise<{ run: RunRecord; progress: ProducerProgress }> {
  const { store, runId } = options;
  const run = await store.requireRun(runId);
  const op = refuseUnresumable(run, producerGone(await store.producerOf(runId)));
  const logger = options.logger ?? silentLogger;
  // 0 when the producer queued nothing yet: the run resumes from its first row.
  const through = run.producedRow;
  const mapping =
    run.options.mapping !== undefined ? parseMapping(run.options.mapping, `mapping of run ${runId}`) : undefined;
  // The source read as the run read it (its recorded format and delimiter).
  const { reader, rows, close } = await ingest(reopenSource(run).reader, {
    op,
    ...(mapping ? { mapping } : {}),
    ...(run.options.ignoreUnknownColumns ? { ignoreUnknownColumns: true } : {}),
    ...(options.loadReferences ? { loadReferences: options.loadReferences } : {}),
  });
  try {
    return await runLife({
      store,
      logger,
      columns: () => reader.columns,
      start: async () => {
        await store.beginProducing(runId);
        logger.info({ runId, from: through + 1 }, 'resuming the run where its producer stopped');
        return run;
      },
      produce: (_run, signal) =>
        produceRun(notYetDone(rows, store, runId, through), {
          queue: options.queue,
          store,
          runId,
          rowsPerJob: run.options.rowsPerJob ?? DEFAULTS.producer.rowsPerJob,
          countedThrough: through,
          sourceColumns: () => reader.columns,
          logger,
          signal,
          ...(options.highWaterMark !== undefined ? { highWaterMark: options.highWaterMark } : {}),
          ...(options.redisOutageMs !== undefined ? { redisOutageMs: options.redisOutageMs } : {}),
        }),
    });
  } finally {
    await close();
  }
}

/**
 * The run's operation, once nothing stands in the way of a resume. `gone`: its producer is known
 * to have exited (it said so, or its pid on this host is free), so its silence need not be waited out.
 */
function refuseUnresumable(run: RunRecord, gone: boolean): Operation {
  const op = run.operation;
  const why = (text: string) => new CrmSyncError('RUN_STATE', `run ${run.id} cannot be resumed: ${text}`);
  if (run.producerDone)
    throw why(
      'its file was read to the end (a run blocked by the API key resumes with the workspace: fix the key, then crm-sync runs resume)',
    );
  if (isRunOnly(op) || run.options.reconcile)
    throw why('it is a reconciled run; run the reconcile (or the sync) again: it sends only what still differs');
  if (runShape(op) === 'invite')
    throw why(
      'invite rows are batched out of file order; import only the addresses the team does not have yet (invitations that went out would go out again)',
    );
  if (run.options.dryRun) throw why('it was a dry run; run it again');
  // Its results may have been evicted: a resume would send again rows that reached the CRM.
  if (run.status === 'failed' && isEvictionReason(run.reason))
    throw why(`Redis evicted keys while it was under way [REDIS_EVICTS]; its reason says the way on: ${run.reason}`);
  const refused = resumeRefusal(run);
  if (refused !== undefined) throw why(refused);
  if (run.status === 'cancelled')
    throw why('it was cancelled; its cancelled rows go again with: crm-sync runs retry ' + run.id);
  const seen = Date.parse(run.producerSeenAt ?? run.createdAt);
  if (run.status !== 'failed' && !gone && Date.now() - seen < PRODUCER_SILENCE_MS) {
    throw why(
      `its producer is still alive (last seen ${Math.round((Date.now() - seen) / 1000)} s ago); wait for it, or for the workers to fail the run once it stops`,
    );
  }
  const changed = sourceChange(run);
  if (changed !== undefined) throw why(changed);
  return op;
}

/** The file's rows less those the store already has a result for, up to the resume point. */
async function* notYetDone(
  rows: AsyncIterable<IngestedRow>,
  store: RunStore,
  runId: string,
  through: number,
): AsyncIterable<IngestedRow> {
  let held: IngestedRow[] = [];
  const release = async function* () {
    const done = new Set(
      (
        await store.getResults(
          runId,
          held.map((r) => r.row),
        )
      ).map((r) => r.row),
    );
    for (const r of held) if (!done.has(r.row)) yield r;
    held = [];
  };
  for await (const row of rows) {
    if (row.row > through) {
      if (held.length > 0) yield* release();
      yield row;
      continue;
    }
    held.push(row);
    if (held.length >= LOOKUP_CHUNK) yield* release();
  }
  if (held.length > 0) yield* release();
}

import { isCreatePayload } from '../crm/index.js';
import { RateLimitError } from 'bullmq';
import type { QueuedRow, RowBatchJobData } from '../queue/index.js';
import { errorMessage } from '../errors/index.js';
import { placeOf, type RowWriter, type WriterFence } from '../runs/index.js';
import { decideJobEnd, decideRow, type LoopEnd, type RowFacts, type RowOutcome } from './answer-decision.js';
import { defer, handOff } from './job-rewrite.js';
import type { SyncJob } from './sync-job.js';
import type { FencedResult } from './result-writer.js';
import { failureResult, inDoubtResult } from './row-results.js';
import { JobLostError, type WorkerCore } from './worker-core.js';

/**
 * Sends a job's rows one request at a time, in order (so `concurrency` stays the requests in
 * flight), and stores their results together before the job completes. A 429 or 401 stops
 * the job: results so far are stored, the job keeps only its unsent rows and goes back to wait.
 */
export async function processRows(
  core: WorkerCore,
  job: SyncJob,
  data: RowBatchJobData,
  token: string,
  signal: AbortSignal | undefined,
): Promise<void> {
  const { queue, pause } = core.parts;
  const results: FencedResult[] = [];
  const loop: LoopEnd<QueuedRow> = {
    rows: data.rows,
    next: 0,
    flaky: [],
    waiting: [],
    stop: undefined,
    attemptsStarted: job.attemptsStarted,
    maxStarts: core.parts.maxStarts,
  };
  let cancelledRun = false;
  try {
    for (; loop.next < data.rows.length; loop.next++) {
      // Another job's 429 paused the workspace: stop here rather than run into it too. (Not
      // before the first row: the pause held back that start, and a start spent is a start.)
      if (loop.next > 0 && pause.inForce) {
        loop.stop = { kind: 'paused' };
        break;
      }
      const r = data.rows[loop.next]!;
      const writer = core.writer(job, data.runId, token, r);
      const outcome = await sendRow(core, job, data, r, writer, signal);
      if (outcome.kind === 'done') {
        // The writer is this row's own (core.writer): it carries the settlement itself.
        const fence: WriterFence = writer;
        if (outcome.settles) fence.settles = outcome.settles;
        results.push({ result: outcome.result, fence });
      } else if (outcome.kind === 'wait') loop.waiting.push({ row: r, ms: outcome.ms });
      else if (outcome.kind === 'cancelled') {
        // The run stopped (a cancel, or failed for evicted keys) while this job was running:
        // none of its rows left is sent.
        cancelledRun = true;
        break;
      } else if (outcome.kind === 'retry') {
        // A job of one row retries through BullMQ's backoff; a row of a batch retries alone,
        // so one flaky row neither holds up nor spends the attempts of the others.
        if (data.rows.length === 1) throw outcome.err;
        loop.flaky.push(r);
      } else if (outcome.kind === 'recorded') {
        if (outcome.result) core.toHistory(data.runId, [outcome.result]);
      } else {
        loop.stop = outcome;
        break;
      }
    }
  } finally {
    // Stored even when the job is lost: the fence refuses what this attempt may no longer write.
    if (results.length > 0) await core.store(job, data.runId, results);
  }
  if (cancelledRun) await core.recordStopped(job, data.runId, token, data.rows.slice(loop.next));
  const end = decideJobEnd(loop);
  if (end.kind === 'complete') {
    if (end.retryAlone.length > 0)
      await handOff(queue, job, data.runId, end.retryAlone, { backoffMs: core.parts.backoffMs });
    if (end.defer.length > 0) await defer(queue, job, token, data, end.defer);
    return;
  }
  if (end.pause) await pause.apply(job, data.runId, end.pause);
  if (end.kind === 'hand-off') return handOff(queue, job, data.runId, end.rows, {});
  if (end.keep) await job.updateData({ runId: data.runId, rows: end.keep });
  throw new RateLimitError();
}

/** Sends one row and turns what came of it into the loop's outcome (a failed row's result included). */
async function sendRow(
  core: WorkerCore,
  job: SyncJob,
  data: RowBatchJobData,
  r: QueuedRow,
  writer: RowWriter,
  signal: AbortSignal | undefined,
): Promise<Exclude<RowOutcome, { kind: 'failed' | 'in-doubt' | 'lost' }>> {
  const { metrics, logger, settleMs } = core.parts;
  // An update takes its token in the sender, once the write fence lets it go (RowSender).
  const post = isCreatePayload(r.payload) ? await core.pacedPost(job, signal) : undefined;
  const sentAt = Date.now();
  let sent;
  try {
    sent = await core.parts.sender.send(writer, r, signal, post);
  } finally {
    post?.settle();
  }
  const verdict =
    sent.kind === 'error' ? await core.judge(job, data.runId, sent.err, data.rows.length > 1, sentAt) : undefined;
  const creates = isCreatePayload(r.payload);
  const createInDoubt = creates && verdict?.kind === 'fail' ? await markerLeft(core, data.runId, r.row) : undefined;
  const facts: RowFacts = { creates, settleMs };
  if (verdict) facts.verdict = verdict;
  if (createInDoubt !== undefined) facts.createInDoubt = createInDoubt;
  const { outcome, counts } = decideRow(sent, facts);
  if (counts === 'succeeded') {
    metrics.succeeded(job.name, 1, data.runId);
    core.onSuccess();
  } else if (counts === 'failed') metrics.rows(job.name, 'failed', 1, data.runId);
  switch (outcome.kind) {
    case 'lost':
      throw new JobLostError(job.id, outcome.reason);
    case 'failed':
      return { kind: 'done', result: failureResult(placeOf(r), outcome.err, r.original) };
    case 'in-doubt':
      logger.warn(
        { runId: data.runId, row: r.row, err: errorMessage(outcome.err) },
        'a create that may have made its deal ran out of attempts before it could look for it: recorded uncertain (runs retry looks again)',
      );
      return { kind: 'done', result: inDoubtResult(placeOf(r), outcome.err, r.original) };
    case 'wait':
      if (outcome.lostCreate)
        logger.info(
          { runId: data.runId, row: r.row },
          'last attempt of a create lost its answer: the row looks for its deal after the settle time instead of failing',
        );
      return outcome;
    default:
      return outcome;
  }
}

/**
 * Whether a create's marker is still there (its create may have been applied): a marker that
 * cannot be read counts as there, since `failed` for an applied create invites a duplicate.
 */
async function markerLeft(core: WorkerCore, runId: string, row: number): Promise<boolean> {
  try {
    return (await core.parts.fence.createsInDoubt(runId, [row])).has(row);
  } catch {
    return true;
  }
}

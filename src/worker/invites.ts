import { RateLimitError } from 'bullmq';
import type { InviteBatchJobData } from '../queue/index.js';
import { placeOf, succeeded, type RowResult } from '../runs/index.js';
import { decideInvites } from './answer-decision.js';
import { splitInviteBatch } from './job-rewrite.js';
import type { SyncJob } from './sync-job.js';
import { failureResult } from './row-results.js';
import { JobLostError, type WorkerCore } from './worker-core.js';

/**
 * Sends a batch of team-member invites as one request. An invite is an email to a person: a
 * batch redelivered after some of its addresses were sent and recorded (a lost lock, a stalled
 * job) sends only the rest.
 */
export async function processInvites(
  core: WorkerCore,
  job: SyncJob,
  whole: InviteBatchJobData,
  token: string,
  signal: AbortSignal | undefined,
): Promise<void> {
  const { client, fence, metrics } = core.parts;
  const rows = await core.withoutResult(whole.runId, whole.rows);
  if (rows.length === 0) return;
  const data = rows.length === whole.rows.length ? whole : { ...whole, rows };
  const fences = data.rows.map((r) => core.writer(job, data.runId, token, r));
  const fenced = (results: RowResult[]) => results.map((result, i) => ({ result, fence: fences[i]! }));
  // Invites carry no record id to order on: the fence here is the job's own lock.
  const post = await core.pacedPost(job, signal);
  const sentAt = Date.now();
  let holds = false;
  try {
    holds = !signal?.aborted && (await fence.holdsJob(fences[0]!));
  } finally {
    if (!holds) post.settle();
  }
  if (!holds) throw new JobLostError(job.id, 'its lock is gone');
  try {
    const body = { emails: data.rows.map((r) => r.email), ...data.options };
    await client.addTeamMembers(body, { ...(signal ? { signal } : {}), onWire: post.tried() });
  } catch (err) {
    if (signal?.aborted) throw new JobLostError(job.id, String(signal.reason));
    const step = decideInvites(await core.judge(job, data.runId, err, false, sentAt), data.rows.length);
    switch (step.kind) {
      case 'retry':
        throw step.err;
      case 'pause':
        await core.parts.pause.apply(job, data.runId, step.verdict);
        throw new RateLimitError();
      case 'split':
        return splitInviteBatch(core.parts.queue, job, data);
      case 'fail': {
        metrics.rows(job.name, 'failed', data.rows.length, data.runId);
        const results = data.rows.map((r) => failureResult(placeOf(r), step.err, r.original));
        return core.store(job, data.runId, fenced(results));
      }
    }
  }
  metrics.succeeded(job.name, data.rows.length, data.runId);
  await core.store(job, data.runId, fenced(data.rows.map((r) => succeeded(r, r.email))));
  core.onSuccess();
}

import type { RunRecord } from './run-types.js';

/**
 * Why the run may still write to the CRM (and an undo planned now would put back only part of
 * it), or undefined once it no longer can: it ended and every row it queued has its result. A
 * running or blocked run writes on; a cancelled or failed one still records the rows on the
 * wire when it stopped, and a cancelled one's producer records those it holds as it stops.
 */
export function stillWriting(run: RunRecord): string | undefined {
  if (run.status === 'running' || run.status === 'blocked')
    return `run ${run.id} is ${run.status}: its rows are still being written`;
  if (run.counts.queued > 0 || (run.status === 'cancelled' && !run.producerDone))
    return `run ${run.id} is ${run.status}, but ${run.counts.queued > 0 ? `${run.counts.queued} of its rows are` : 'its rows are'} still being recorded (requests on the wire finish)`;
  return undefined;
}

import { setTimeout as sleep } from 'node:timers/promises';
import { DEFAULTS } from '../config/index.js';
import type { RunStore } from './run-store.js';
import type { RunRecord } from './run-types.js';

export interface RunReadsOptions {
  /** Time between reads (ms). Default DEFAULTS.runs.followEveryMs. */
  everyMs?: number;
  /** Keeps reading while this holds. Default: the run is `running`. */
  going?: (run: RunRecord) => boolean;
  /** Stops the reads (the loop ends after the read in hand). */
  signal?: AbortSignal;
  /** How one read is made, given the last. Default: the store's record (a run that is gone throws). */
  read?: (last: RunRecord | undefined) => Promise<RunRecord>;
}

/**
 * A run as it goes, read every `everyMs`: the one way a process follows a run's record
 * (`import --wait`, the demo, a nightly sync's watch). Yields the first read at once and each
 * read after, the read that ends it (`going` false) included; ends early on `signal`.
 */
export async function* runReads(
  store: RunStore,
  runId: string,
  options: RunReadsOptions = {},
): AsyncGenerator<RunRecord> {
  const everyMs = options.everyMs ?? DEFAULTS.runs.followEveryMs;
  const going = options.going ?? ((run: RunRecord) => run.status === 'running');
  const read = options.read ?? (() => store.requireRun(runId));
  let run = await read(undefined);
  yield run;
  while (going(run) && !options.signal?.aborted) {
    const slept = await sleep(everyMs, true, options.signal ? { signal: options.signal } : {}).catch(() => false);
    if (!slept) return;
    run = await read(run);
    yield run;
  }
}

/** The run once `going` no longer holds (by default: once it is no longer running). */
export async function runWhenDone(store: RunStore, runId: string, options: RunReadsOptions = {}): Promise<RunRecord> {
  let last: RunRecord | undefined;
  for await (const run of runReads(store, runId, options)) last = run;
  // runReads yields at least once (its first read), or throws.
  return last!;
}

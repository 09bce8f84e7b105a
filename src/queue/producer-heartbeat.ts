import type { RunStore } from '../runs/index.js';

/** How often a producing process says it is alive. */
export const PRODUCER_HEARTBEAT_MS = 15_000;
/** How long a producer may stay silent before its run is failed (several missed beats). */
export const PRODUCER_SILENCE_MS = 120_000;

/**
 * Renews the run's producerSeenAt on a timer for as long as the caller produces (reading the
 * file, building a reconcile index, waiting for room in the queue). Returns the stop function.
 */
export function keepProducerAlive(store: RunStore, runId: string, everyMs = PRODUCER_HEARTBEAT_MS): () => void {
  const timer = setInterval(() => {
    store.touchProducer(runId).catch(() => {
      // A missed beat is harmless; a run is only failed after many of them.
    });
  }, everyMs);
  timer.unref();
  return () => clearInterval(timer);
}

/** How often a producing process says it is alive (run-life.ts renews it more often). */
export const PRODUCER_HEARTBEAT_MS = 15_000;
/** How long a producer may stay silent before its run is failed (several missed beats). */
export const PRODUCER_SILENCE_MS = 120_000;

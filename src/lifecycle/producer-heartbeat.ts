import { hostname } from 'node:os';

/** How often a producing process says it is alive (run-life.ts renews it more often). */
export const PRODUCER_HEARTBEAT_MS = 15_000;
/** How long a producer may stay silent before its run is failed (several missed beats). */
export const PRODUCER_SILENCE_MS = 120_000;

const EXITED = 'exited@';
const started = new Date().toISOString();

/** This process as a run's producer: `host/pid/start` (RunStore.setProducer). */
export function producerIdentity(): string {
  return `${hostname()}/${process.pid}/${started}`;
}

/** What a producer that stopped stores instead of its identity. */
export function exitedProducer(at = new Date()): string {
  return `${EXITED}${at.toISOString()}`;
}

/**
 * Whether the producer a run names is known to be gone: it marked itself exited, or it ran on
 * this host under a pid no process has any more (it exited while Redis did not answer, so it
 * could not say so). Unknown (another host, nothing stored): false, and the silence rule decides.
 */
export function producerGone(producer: string | null): boolean {
  if (producer === null) return false;
  if (producer.startsWith(EXITED)) return true;
  const [host, pid] = producer.split('/');
  if (host !== hostname() || !pid || !/^\d+$/.test(pid)) return false;
  if (Number(pid) === process.pid) return producer !== producerIdentity();
  try {
    process.kill(Number(pid), 0);
    return false;
  } catch (err) {
    // EPERM: a process of another user holds the pid, so it is alive.
    return (err as NodeJS.ErrnoException).code === 'ESRCH';
  }
}

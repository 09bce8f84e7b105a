import { runShape } from '../crm/index.js';
import type { RedisClient } from '../redis/index.js';
import { DEFAULTS } from '../config/index.js';
import { errorMessage } from '../errors/index.js';
import type { Logger } from '../log/index.js';
import { EVICTION_TAG, evicts, readEviction, type EvictionState } from '../redis/index.js';
import type { RunRecord, RunStore } from '../runs/index.js';
import type { RunRef } from '../keys/index.js';
import { workspaceOfQueue } from '../queue/index.js';
import type { SyncWorker } from './sync-worker.js';

export interface EvictionWatchOptions {
  redis: RedisClient;
  store: RunStore;
  logger: Logger;
  /** The pool's BullMQ workers now (the roster starts and closes them). */
  workers: () => Iterable<SyncWorker>;
  /** Whether the pool serves this workspace (its runs are ended or held here). */
  serves: (workspace: string) => boolean;
  /** How often INFO is read (ms). */
  everyMs: number;
}

export interface EvictionWatch {
  /** Looks once now (the timer does it every period). */
  tick(): Promise<void>;
  stop(): void;
}

/**
 * Redis switched to evicting keys while the workers run (start-up refuses an evicting Redis; a
 * `CONFIG SET maxmemory-policy allkeys-lru` later is not refused by anything): every period
 * the policy and `evicted_keys` are read. While Redis evicts, the workers stop taking jobs, said
 * once, naming REDIS_EVICTS. A run of a served workspace is held (blocked) while no key was
 * evicted yet, and taken again once the policy is noeviction; once keys were evicted, any of
 * them may have been its queued rows or results, so it is failed with that reason: left running
 * it would stay at 6,350 of 12,000 for good. `import --wait` exits with the reason (exit 6).
 */
export function startEvictionWatch(options: EvictionWatchOptions): EvictionWatch {
  const { store, logger } = options;
  let baseline: number | undefined;
  let holding = false;
  /** Runs held by a process that stopped before the policy came back are taken up at our first look. */
  let lookedForHeld = false;
  let busy = false;

  const tick = async (): Promise<void> => {
    if (busy) return;
    busy = true;
    try {
      noteSeen();
      const state = await readEviction(options.redis);
      if (!state) return;
      baseline ??= state.evictedKeys;
      const evicted = state.evictedKeys - baseline;
      if (!evicts(state) && evicted <= 0) {
        if (holding || !lookedForHeld) await release(state);
        lookedForHeld = true;
        return;
      }
      lookedForHeld = true;
      if (!holding) {
        holding = true;
        logger.error(
          { policy: state.policy, evictedKeys: evicted },
          `Redis evicts keys (maxmemory-policy ${state.policy}; ${evicted} keys evicted since this worker looked) ${EVICTION_TAG}: ` +
            'this worker stops taking jobs; queued rows and results could disappear. Set maxmemory-policy noeviction (CONFIG SET maxmemory-policy noeviction)',
        );
      }
      // Every period: a worker the roster started since is held too.
      for (const w of options.workers()) if (!w.worker.isPaused()) await w.worker.pause(true).catch(() => undefined);
      await endRuns(state, evicted);
      // Evictions are said (and their runs failed) once: the policy alone decides the hold from now on.
      if (evicted > 0) baseline = state.evictedKeys;
    } catch (err) {
      logger.warn({ err: errorMessage(err) }, 'could not read whether Redis evicts keys; looked at again next period');
    } finally {
      busy = false;
    }
  };

  const release = async (state: EvictionState): Promise<void> => {
    const held = holding;
    holding = false;
    if (held) for (const w of options.workers()) void w.worker.resume();
    let resumed = 0;
    for (const run of await runsOf('blocked'))
      if (run.reason?.includes(EVICTION_TAG) && (await store.resumeRun(run.id).catch(() => false))) resumed += 1;
    if (held || resumed > 0)
      logger.info({ policy: state.policy, resumed }, 'Redis evicts no keys any more: taking jobs again');
  };

  const runsOf = async (status: 'running' | 'blocked'): Promise<RunRecord[]> => {
    const { runs } = await store.listRuns({ status, limit: 1000 });
    return runs.filter((r) => options.serves(r.workspace));
  };

  /** Runs whose jobs the pool's workers took, by id (bounded, newest last). */
  const seen = new Map<string, RunRef>();
  const noteSeen = () => {
    for (const w of options.workers()) {
      const workspace = workspaceOfQueue(w.queue.name);
      for (const id of w.runsSeen) {
        seen.delete(id);
        seen.set(id, { id, workspace });
      }
    }
    // Not a setting: far more runs than a pool runs at once.
    for (const id of seen.keys()) {
      if (seen.size <= 1000) break;
      seen.delete(id);
    }
  };

  /**
   * Running runs of the pool's jobs that the status index no longer lists (its entries evicted):
   * read by their own key, so an eviction that took the index cannot leave them running for good.
   */
  const unlisted = async (listed: RunRecord[], status: 'running' | 'blocked'): Promise<RunRecord[]> => {
    const known = new Set(listed.map((r) => r.id));
    const found: RunRecord[] = [];
    for (const ref of seen.values()) {
      if (known.has(ref.id) || !options.serves(ref.workspace)) continue;
      const now = await store.statusOf(ref);
      if (now?.status !== status) continue;
      const run = await store.getRun(ref.id).catch(() => null);
      if (run) found.push(run);
    }
    return found;
  };

  const endRuns = async (state: EvictionState, evicted: number): Promise<void> => {
    const listedRunning = await runsOf('running');
    const running = [...listedRunning, ...(await unlisted(listedRunning, 'running'))];
    const listedBlocked = evicted > 0 ? await runsOf('blocked') : [];
    const blocked = [...listedBlocked, ...(evicted > 0 ? await unlisted(listedBlocked, 'blocked') : [])].filter((r) =>
      r.reason?.includes(EVICTION_TAG),
    );
    for (const run of running) {
      if (evicted > 0) await store.failByRef(run, evictedReason(run, state, evicted));
      else
        await store.blockRun(
          run.id,
          `Redis is set to evict keys (maxmemory-policy ${state.policy}) ${EVICTION_TAG}: the workers stopped taking jobs before a key was seen evicted. ` +
            'Set maxmemory-policy noeviction: the workers take the run up again by themselves',
        );
    }
    // Held while Redis only threatened to evict; now it did.
    for (const run of blocked) await store.failByRef(run, evictedReason(run, state, evicted));
  };

  const timer = setInterval(() => void tick(), options.everyMs);
  timer.unref();
  void tick();
  return { tick, stop: () => clearInterval(timer) };
}

/** Why a run was failed for evictions, with what it had sent and a way on that makes no duplicate. */
export function evictedReason(
  run: RunRecord,
  state: EvictionState,
  evicted: number,
  onWireMs: number = DEFAULTS.workspace.requestTimeoutMs,
): string {
  const c = run.counts;
  const again = `crm-sync import ${run.source} -w ${run.workspace}`;
  const shape = runShape(run.operation);
  const way =
    shape === 'create'
      ? `Do not import the file again as it is (its creates that reached the CRM would be made twice): set noeviction, then send the rest with a reconciled import that creates only missing deals: ${again} --op ${run.operation} --upsert --match name`
      : shape === 'invite'
        ? 'Set noeviction, then import only the addresses the team does not have yet (invitations that went out would go out again)'
        : shape === 'sync' || run.options.reconcile
          ? 'Set noeviction, then run the same reconciled import again: it sends only what still differs'
          : `Set noeviction, then import the file again (updates send the same values again): ${again} --op ${run.operation}`;
  return (
    `Redis evicted ${evicted} keys (maxmemory-policy ${state.policy}) while this run was under way ${EVICTION_TAG}: ` +
    `its queued rows or results may be gone, so it cannot finish; ${c.succeeded} rows had succeeded, ${c.queued} had no result yet. ` +
    // The way on below may create what a row of this run still sends: so none is sent from now on.
    `No worker sends another of its rows (rows taken from now on are recorded failed, not sent); requests already on the wire end within ${Math.ceil(onWireMs / 1000)} s (the request timeout). ${way}`
  );
}

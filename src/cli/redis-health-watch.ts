import { probeKey } from '../keys/index.js';
import { evicts, isRedisFull, readEviction, type EvictionState } from '../redis/index.js';
import type { RunStore } from '../runs/index.js';

/**
 * While a run is followed, says on stderr when Redis itself keeps its rows waiting: full
 * (maxmemory, noeviction: the workers take no job until it has room) or evicting keys
 * (REDIS_EVICTS: the workers stop taking jobs). Said when it changes, and once when it clears;
 * without it a follower printed the same progress line for minutes without a reason.
 */
export class RedisHealthWatch {
  #said = '';
  readonly #key: string;
  /** The last evicting policy seen. */
  #policy: string | undefined;
  /** `evicted_keys` when the watch began: more since means keys of the run may be gone. */
  #baseline: number | undefined;
  /**
   * Set once Redis evicted keys since the watch began (the run may never finish): the policy
   * that evicted them (not a noeviction set back since) and the keys evicted since the start.
   */
  evicted: EvictionState | undefined;
  /** Whether Redis evicts keys now (its policy, at the last look). */
  evicting = false;

  constructor(
    private readonly store: RunStore,
    workspace: string,
  ) {
    this.#key = probeKey(store.prefix, workspace);
  }

  /** Reads `evicted_keys` now, so evictions from here on are told apart from older ones. */
  async begin(): Promise<void> {
    this.#baseline ??= (await readEviction(this.store.redis))?.evictedKeys;
  }

  /** Looks once; answers the line to print, if what Redis says changed. */
  async look(): Promise<string | undefined> {
    const why: string[] = [];
    try {
      // A write that expires at once: the same probe a paused worker makes.
      await this.store.redis.set(this.#key, '1', 'PX', 1000);
    } catch (err) {
      if (isRedisFull(err))
        why.push(
          'Redis is full (maxmemory reached): workers take no job until it has room, and no row is sent meanwhile. Free memory or raise maxmemory; the run goes on by itself',
        );
    }
    const eviction = await readEviction(this.store.redis);
    if (eviction) {
      this.#baseline ??= eviction.evictedKeys;
      this.evicting = evicts(eviction);
      if (this.evicting) this.#policy = eviction.policy;
      if (eviction.evictedKeys > this.#baseline)
        this.evicted = { policy: this.#policy ?? eviction.policy, evictedKeys: eviction.evictedKeys - this.#baseline };
    }
    if (eviction && evicts(eviction))
      why.push(
        `Redis evicts keys (maxmemory-policy ${eviction.policy}) [REDIS_EVICTS]: workers stop taking jobs, and queued rows or results may be lost. ` +
          'Set maxmemory-policy noeviction',
      );
    const now = why.join('\n');
    if (now === this.#said) return undefined;
    const before = this.#said;
    this.#said = now;
    if (now === '') return before === '' ? undefined : 'Redis has room again and evicts nothing: rows are being taken';
    return now;
  }
}

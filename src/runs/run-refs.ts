import type { RunKeys, RunRef } from '../keys/index.js';
import type { RedisClient } from '../redis/index.js';

/**
 * Run id → workspace, the hash tag of the run's keys (docs/architecture.md, "Redis Cluster"):
 * read from `<p>:runs:workspace` and cached, since a run never changes workspace.
 */
export class RunRefs {
  readonly #cache = new Map<string, RunRef>();

  constructor(
    private readonly redis: RedisClient,
    private readonly keys: RunKeys,
  ) {}

  /** The workspace of each run (null for an unknown id), one HMGET for the ones not cached. */
  async many(ids: readonly string[]): Promise<Array<RunRef | null>> {
    const missing = ids.filter((id) => !this.#cache.has(id));
    if (missing.length > 0) {
      const found = await this.redis.hmget(this.keys.runWorkspaces(), ...missing);
      missing.forEach((id, i) => {
        const workspace = found[i];
        if (workspace) this.remember({ id, workspace });
      });
    }
    return ids.map((id) => this.#cache.get(id) ?? null);
  }

  /** The run's ref, or null when there is no such run. */
  async one(id: string): Promise<RunRef | null> {
    return this.#cache.get(id) ?? (await this.many([id]))[0] ?? null;
  }

  remember(ref: RunRef): void {
    // Bounded: a long-lived dashboard lists many runs; the ones in use come back in one HMGET.
    if (this.#cache.size >= 50_000) this.#cache.clear();
    this.#cache.set(ref.id, ref);
  }

  forget(id: string): void {
    this.#cache.delete(id);
  }
}

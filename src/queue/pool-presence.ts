import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import type { RedisClient } from '../redis/index.js';
import { poolsKey } from '../keys/index.js';

export interface PoolAnnouncement {
  host: string;
  pid: number;
  /** The workspaces named with `-w`, or null: every workspace of its config (reloaded on demand). */
  workspaces: string[] | null;
  /** When it last said so (epoch ms). */
  at: number;
}

export interface PoolPresenceOptions {
  redis: RedisClient;
  prefix: string;
  workspaces: string[] | null;
  /** How often the pool says it is alive. Default 10000 ms; readers trust an entry for 3 periods. */
  everyMs?: number;
}

/** An entry older than this is a pool that died without saying goodbye. */
const FORGET_AFTER_MS = 5 * 60_000;
const DEFAULT_EVERY_MS = 10_000;

/**
 * One worker process's entry in the pools hash (`<p>:pools`), kept fresh while it runs: it says
 * which workspaces the process serves whether or not it holds a BullMQ worker for them now. An
 * idle workspace has none (docs/architecture.md, "Idle workspaces"), so BullMQ's own worker list
 * cannot tell "served" from "no worker at all".
 */
export class PoolPresence {
  readonly id = `${hostname()}/${process.pid}/${randomBytes(3).toString('hex')}`;
  readonly #o: PoolPresenceOptions;
  #timer: NodeJS.Timeout | undefined;
  #ticks = 0;

  constructor(options: PoolPresenceOptions) {
    this.#o = options;
  }

  async start(): Promise<void> {
    await this.#announce();
    this.#timer = setInterval(() => void this.#announce().catch(() => undefined), this.#o.everyMs ?? DEFAULT_EVERY_MS);
    this.#timer.unref();
  }

  /**
   * Removes the entry, waiting at most 1 s: a worker connection queues commands while Redis is
   * away, and shutdown must stay bounded. An entry left behind stops counting after 3 periods.
   */
  async stop(): Promise<void> {
    clearInterval(this.#timer);
    const removed = this.#o.redis.hdel(poolsKey(this.#o.prefix), this.id).catch(() => undefined);
    await Promise.race([removed, new Promise((resolve) => setTimeout(resolve, 1000).unref())]);
  }

  async #announce(): Promise<void> {
    const key = poolsKey(this.#o.prefix);
    const entry: PoolAnnouncement = {
      host: hostname(),
      pid: process.pid,
      workspaces: this.#o.workspaces,
      at: Date.now(),
    };
    await this.#o.redis.hset(key, this.id, JSON.stringify(entry));
    // Pools killed with -9 never remove their entry; one in 30 announcements clears such leftovers.
    if (this.#ticks++ % 30 === 0) {
      const stale = [...(await readPools(this.#o.redis, this.#o.prefix))]
        .filter(([, p]) => p === null || Date.now() - p.at > FORGET_AFTER_MS)
        .map(([id]) => id);
      if (stale.length > 0) await this.#o.redis.hdel(key, ...stale);
    }
  }
}

async function readPools(redis: RedisClient, prefix: string): Promise<Map<string, PoolAnnouncement | null>> {
  const raw = await redis.hgetall(poolsKey(prefix));
  const out = new Map<string, PoolAnnouncement | null>();
  for (const [id, json] of Object.entries(raw)) {
    try {
      out.set(id, JSON.parse(json) as PoolAnnouncement);
    } catch {
      out.set(id, null);
    }
  }
  return out;
}

/**
 * Worker processes serving the workspace now (announced within the last 3 periods). A pool with
 * no `-w` list counts for every workspace: it reloads its config when work for an unknown one
 * is signalled.
 */
export async function workerCount(redis: RedisClient, prefix: string, workspace: string): Promise<number> {
  const fresh = Date.now() - 3 * DEFAULT_EVERY_MS;
  let n = 0;
  for (const pool of (await readPools(redis, prefix)).values()) {
    if (pool === null || pool.at < fresh) continue;
    if (pool.workspaces === null || pool.workspaces.includes(workspace)) n++;
  }
  return n;
}

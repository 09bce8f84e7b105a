import { QueueKeys } from 'bullmq';
import { bullPrefix, workBoardKey } from '../keys/index.js';
import { defineScript, flagReply, subscribeChannel, type RedisClient } from '../redis/index.js';
import { queueName } from './queue-names.js';

/** Removes the workspace unless it was signalled since its count was read (the .lua file says why). */
const SETTLE = defineScript({
  file: 'settle-work-1',
  keys: ['boardKey'],
  args: ['workspace', 'seen'],
  reply: flagReply,
});

export interface WorkBoardOptions {
  /** A connected ioredis client, owned by the caller. */
  redis: RedisClient;
  /** Key prefix from the config. */
  prefix: string;
}

/**
 * Which workspaces have work queued (`<p>:work`, workspace → signal count): whoever queues jobs
 * bumps the workspace after they are added (the producer, runLife when a run starts); worker
 * pools read this one key and start a BullMQ worker only for the workspaces listed, so an idle
 * workspace costs no connection and no command (docs/architecture.md, "Idle workspaces").
 */
export class WorkBoard {
  readonly #redis: RedisClient;
  readonly #key: string;
  readonly #prefix: string;
  /** Where each signal is also published: a pool subscribed starts the worker at once. */
  readonly #channel: string;

  constructor(options: WorkBoardOptions) {
    this.#redis = options.redis;
    this.#prefix = options.prefix;
    this.#key = workBoardKey(options.prefix);
    this.#channel = `${this.#key}:signals`;
  }

  /**
   * Says the workspace has jobs; call it after they are added. Published once the board holds
   * it, so a pool woken by the message finds it listed. The board is what counts: a publish
   * refused (an ACL without pub/sub) costs the pools only their next poll, not the producer's step.
   */
  async signal(workspace: string): Promise<void> {
    await this.#redis.zincrby(this.#key, 1, workspace);
    await this.#redis.publish(this.#channel, workspace).catch(() => 0);
  }

  /**
   * Calls `onSignal` at every signal, on a connection of its own (a subscriber can send nothing
   * else). A pool polls the board every `pollMs` (1 s) as well, so this only makes it sooner:
   * an idle workspace's run used to wait half a second on average for its first job to
   * be taken. A message lost while the connection is down costs only that wait. Returns the
   * closer.
   */
  watch(onSignal: () => void, onError: (err: unknown) => void): () => void {
    return subscribeChannel(this.#redis, { channel: this.#channel, onMessage: onSignal, onError });
  }

  /** Workspaces with work, and the count to give `settle` (read before checking the queue). */
  async listed(): Promise<Map<string, string>> {
    const flat = await this.#redis.zrange(this.#key, 0, -1, 'WITHSCORES');
    const out = new Map<string, string>();
    for (let i = 0; i + 1 < flat.length; i += 2) out.set(flat[i]!, flat[i + 1]!);
    return out;
  }

  /**
   * Puts back on the board every workspace whose queue holds jobs no one signalled: jobs queued
   * by a version before the board, or moved back to wait by hand (Bull Board's retry). With
   * `lockMs`, one process of the fleet at a time (the pools that serve every workspace); answers
   * the workspaces found, or null when another process holds the lock. Costs 4 commands a
   * workspace, sent together.
   */
  async sweep(workspaces: readonly string[], lockMs?: number): Promise<string[] | null> {
    const lock = `${this.#key}:sweep`;
    if (lockMs !== undefined && (await this.#redis.set(lock, String(Date.now()), 'PX', lockMs, 'NX')) !== 'OK')
      return null;
    const keys = new QueueKeys(bullPrefix(this.#prefix));
    const found: string[] = [];
    for (let i = 0; i < workspaces.length; i += 250) {
      const chunk = workspaces.slice(i, i + 250);
      // One command each rather than one pipeline: each workspace's queue has its own Cluster slot.
      const counts = await Promise.all(
        chunk.map((ws) => {
          const k = keys.getKeys(queueName(ws));
          const one = (read: Promise<number>) => read.catch(() => 0);
          return Promise.all([
            one(this.#redis.llen(k.wait!)),
            one(this.#redis.zcard(k.delayed!)),
            one(this.#redis.zcard(k.prioritized!)),
            one(this.#redis.llen(k.active!)),
          ]);
        }),
      );
      chunk.forEach((ws, n) => {
        if (counts[n]!.some((count) => count > 0)) found.push(ws);
      });
    }
    for (const ws of found) await this.signal(ws);
    return found;
  }

  /** Takes the workspace off the board unless it was signalled after `seen` was read. */
  async settle(workspace: string, seen: string): Promise<boolean> {
    return SETTLE.run(this.#redis, { boardKey: this.#key }, { workspace, seen });
  }
}

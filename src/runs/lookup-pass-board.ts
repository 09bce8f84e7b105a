import { asNumber, defineScript, flagReply, kindReply, type RedisClient } from '../redis/index.js';
import { DEFAULTS } from '../config/index.js';
import { RunKeys } from '../keys/index.js';

/**
 * Where the worker processes of one workspace agree on deal-list passes (docs/architecture.md,
 * "Creates: shared lookup passes"). One hash per workspace, `<p>:ws:{<w>}:lookup`:
 *   next        earliest start of the next pass (Redis clock, ms)
 *   want        the earliest creation time a create waiting for a pass needs (CRM clock, ms)
 *   holder      the token of the process running a pass, `leaseUntil` its lease
 *   passStartedAt / passFrom   the pass under way
 *   snapStartedAt / snapFrom   the last finished pass, whose deals are in `<p>:ws:{<w>}:lookup:snap`
 * Times are Redis's clock, the clock create markers use, so a snapshot from any process can
 * tell whether a create settled before the pass began.
 */

// The board's scripts (src/redis/commands/*-lookup-pass-*.lua; Redis's clock, includes/redis-clock.lua).
/** Asks for a pass: {'run', from, now} (a PassTurn as it is) or {'wait', ms, now}. */
const ASK = defineScript({
  file: 'ask-lookup-pass-1',
  keys: ['boardKey'],
  args: ['from', 'token', 'leaseMs', 'ttlMs'],
  reply: kindReply({ run: { from: asNumber, startedAt: asNumber }, wait: { ms: asNumber, now: asNumber } }),
});
/** True while the token still holds the pass (its lease is moved on). */
const RENEW = defineScript({
  file: 'renew-lookup-pass-1',
  keys: ['boardKey'],
  args: ['token', 'leaseMs'],
  reply: flagReply,
});
/** Ends the pass; its deals become the snapshot. False when the token had lost it. */
const FINISH = defineScript({
  file: 'finish-lookup-pass-2',
  keys: ['boardKey', 'snapKey'],
  args: ['token', 'gapMs', 'body', 'ttlMs'],
  reply: flagReply,
});

export interface LookupPassBoardOptions {
  redis: RedisClient;
  /** Key prefix. Default DEFAULTS.config.prefix. */
  prefix?: string;
  workspace: string;
  /**
   * A pass's lease, renewed on a timer (a third of it) while the pass runs: a process killed
   * mid-pass holds the workspace's lookups up this long at most. Default DEFAULTS.lookup.passLeaseMs.
   */
  leaseMs?: number;
  /** How long the board and the last snapshot outlive their last use (ms). Default DEFAULTS.lookup.boardTtlMs. */
  ttlMs?: number;
}

export type PassTurn =
  /** Run the pass now, for deals created from `from` on; `startedAt` is its start (Redis clock). */
  | { kind: 'run'; from: number; startedAt: number }
  /** A pass is under way elsewhere, or the next may not start yet: come back in `ms`. */
  | { kind: 'wait'; ms: number };

/** The last finished pass, as the board knows it. */
export interface PassSnapshotMeta {
  startedAt: number;
  from: number;
}

export class LookupPassBoard {
  readonly #redis: RedisClient;
  readonly #board: string;
  readonly #snap: string;
  readonly leaseMs: number;
  readonly #ttlMs: number;

  constructor(options: LookupPassBoardOptions) {
    this.#redis = options.redis;
    const keys = new RunKeys(options.prefix ?? DEFAULTS.config.prefix);
    this.#board = keys.lookupBoard(options.workspace);
    this.#snap = keys.lookupSnapshot(options.workspace);
    this.leaseMs = options.leaseMs ?? DEFAULTS.lookup.passLeaseMs;
    this.#ttlMs = options.ttlMs ?? DEFAULTS.lookup.boardTtlMs;
  }

  /** Asks for a pass that finds deals created from `from` on (the need is remembered for the next pass). */
  async ask(from: number, token: string): Promise<PassTurn> {
    const turn = await ASK.run(
      this.#redis,
      { boardKey: this.#board },
      { from: Math.floor(from), token, leaseMs: this.leaseMs, ttlMs: this.#ttlMs },
    );
    return turn.kind === 'run' ? turn : { kind: 'wait', ms: turn.ms };
  }

  /** Keeps the pass while it reads pages; false once another process has taken it over. */
  async renew(token: string): Promise<boolean> {
    return RENEW.run(this.#redis, { boardKey: this.#board }, { token, leaseMs: this.leaseMs });
  }

  /** Ends the pass; `body` (the deals it saw, encoded by the caller) becomes the shared snapshot. */
  async finish(token: string, gapMs: number, body: Buffer | undefined): Promise<boolean> {
    const args = { token, gapMs: Math.max(0, Math.round(gapMs)), body: body ?? '', ttlMs: this.#ttlMs };
    return FINISH.run(this.#redis, { boardKey: this.#board, snapKey: this.#snap }, args);
  }

  async snapshotMeta(): Promise<PassSnapshotMeta | undefined> {
    const [startedAt, from] = await this.#redis.hmget(this.#board, 'snapStartedAt', 'snapFrom');
    if (startedAt == null || from == null) return undefined;
    return { startedAt: Number(startedAt), from: Number(from) };
  }

  /** The snapshot's body, if it has not expired. */
  async snapshotBody(): Promise<Buffer | undefined> {
    return (await this.#redis.getBuffer(this.#snap)) ?? undefined;
  }
}

import { asNumber, defineScript, flagReply, kindReply, valueReply, type RedisClient } from '../redis/index.js';
import { DEFAULTS } from '../config/index.js';
import type { ListResource } from '../crm/index.js';
import { RunKeys } from '../keys/index.js';

/**
 * Where the worker processes of one workspace agree on whole-list passes: the deal lookup's
 * (docs/architecture.md, "Creates: shared lookup passes"), and, one board per list, those that
 * serve plain imports' before-values (`before`: `<p>:ws:{<w>}:before:<res>`, "Before-values:
 * shared passes"). One hash per workspace (and list), `<p>:ws:{<w>}:lookup`:
 *   next        earliest start of the next pass (Redis clock, ms)
 *   want        the earliest creation time a create waiting for a pass needs (CRM clock, ms)
 *   holder      the token of the process running a pass, `leaseUntil` its lease
 *   passStartedAt / passFrom   the pass under way
 *   snapStartedAt / snapFrom   the last finished pass, whose deals are in `<p>:ws:{<w>}:lookup:snap`
 * Times are Redis's clock, the clock create markers use, so a snapshot from any process can
 * tell whether a create settled before the pass began.
 */

// The board's scripts (src/redis/commands/*-lookup-pass-*.lua; Redis's clock, includes/redis-clock.lua).
/** Asks for a pass: {'run', from, now} (a PassTurn as it is) or {'wait', ms, now, passStartedAt}. */
const ASK = defineScript({
  file: 'ask-lookup-pass-1',
  keys: ['boardKey'],
  args: ['from', 'token', 'leaseMs', 'ttlMs'],
  reply: kindReply({
    run: { from: asNumber, startedAt: asNumber },
    wait: { ms: asNumber, now: asNumber, passStartedAt: asNumber },
  }),
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
/** The first time a process of the workspace asked for a run's before-values, and now (Redis clock). */
const STAMP_RUN = defineScript({
  file: 'stamp-before-run-1',
  keys: ['runKey'],
  args: ['ttlMs'],
  reply: valueReply((raw) => {
    const [first, now] = (Array.isArray(raw) ? raw : []).map(Number);
    if (!Number.isFinite(first) || !Number.isFinite(now)) throw new Error('stamp-before-run: unreadable reply');
    return { first: first!, now: now! };
  }),
});

/**
 * A snapshot larger than this (gzip'd) is not shared: each process reads the list on its own
 * then, and Redis strings stay small (a Redis string holds at most 512 MB).
 */
export const MAX_SHARED_SNAPSHOT_BYTES = 32 * 1024 * 1024;

export interface LookupPassBoardOptions {
  redis: RedisClient;
  /** Key prefix. Default DEFAULTS.config.prefix. */
  prefix?: string;
  workspace: string;
  /** The board of the before-value passes over this list, rather than the deal lookup's. */
  before?: ListResource;
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
  /**
   * A pass is under way elsewhere (begun at `passStartedAt`, Redis clock), or the next may not
   * start yet (`passStartedAt` undefined): come back in `ms`. `now`: Redis's clock when asked.
   */
  | { kind: 'wait'; ms: number; now: number; passStartedAt?: number };

/** The last finished pass, as the board knows it. */
export interface PassSnapshotMeta {
  startedAt: number;
  from: number;
}

export class LookupPassBoard {
  readonly #redis: RedisClient;
  readonly #keys: RunKeys;
  readonly #board: string;
  readonly #snap: string;
  readonly workspace: string;
  readonly leaseMs: number;
  readonly #ttlMs: number;

  constructor(options: LookupPassBoardOptions) {
    this.#redis = options.redis;
    const keys = (this.#keys = new RunKeys(options.prefix ?? DEFAULTS.config.prefix));
    const { workspace, before } = options;
    this.workspace = workspace;
    this.#board = before ? keys.beforeBoard(workspace, before) : keys.lookupBoard(workspace);
    this.#snap = before ? keys.beforeSnapshot(workspace, before) : keys.lookupSnapshot(workspace);
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
    if (turn.kind === 'run') return turn;
    return {
      kind: 'wait',
      ms: turn.ms,
      now: turn.now,
      ...(turn.passStartedAt >= 0 ? { passStartedAt: turn.passStartedAt } : {}),
    };
  }

  /**
   * When a process of the workspace first asked for the run's before-values (`first`), and
   * Redis's clock now: the earliest start of a pass that may serve the run's rows.
   */
  async runStart(runId: string): Promise<{ first: number; now: number }> {
    return STAMP_RUN.run(
      this.#redis,
      { runKey: this.#keys.beforeRunStart(this.workspace, runId) },
      { ttlMs: this.#ttlMs },
    );
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

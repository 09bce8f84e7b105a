import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { DEFAULTS } from '../config/index.js';
import type { CrmClient, ListResource } from '../crm/index.js';
import { silentLogger, type Logger } from '../log/index.js';
import type { LookupPassBoard } from '../runs/index.js';
import { decodeBeforeSnapshot, encodeBeforeSnapshot, type BeforeSnapshotOrigin } from './before-snapshot.js';
import { RUNS_REMEMBERED, type ReadTime, type ReadUse, type Snapshot } from './list-snapshot.js';

export interface SharedBeforePassesOptions {
  /** The CRM's address goes into every snapshot's origin (a workspace pointed elsewhere reads anew). */
  client: Pick<CrmClient, 'baseUrl'>;
  /**
   * The workspace's before-value pass boards, one per list (LookupPassBoard with `before`).
   * Default: none (each process reads its own; nothing is shared).
   */
  beforeBoards?: (resource: ListResource) => LookupPassBoard;
  logger?: Logger;
}

/** What SharedBeforePasses uses of its owner's (DriftCheck's) own reads. */
export interface OwnListReads {
  /** This process's own last whole-list read, by resource: a pass it ran for the board is kept there too. */
  snaps: Pick<Map<ListResource, Snapshot>, 'get' | 'set' | 'delete'>;
  /** Whether a read is too old for `use` (DriftCheck#stale, with no run bound). */
  stale(s: ReadTime, use: ReadUse): boolean;
  /** One whole-list pass of this process's, in the workspace's request budget (CRM errors propagate). */
  pass(resource: ListResource): Promise<Snapshot>;
}

/** A process waiting for another's before-value pass looks at the board this often. */
const SHARED_PASS_POLL_MS = 200;
/**
 * The longest a process waits for another's pass before it reads the list itself: half the
 * row's wait for its before-values, so its own pass still has the other half.
 */
const SHARED_PASS_WAIT_MS = DEFAULTS.worker.beforeReadWaitMs / 2;

/**
 * The before-value passes this process shares with the other worker processes of its workspace
 * through the workspace's pass boards (docs/architecture.md, "Before-values: shared passes"):
 * with two processes the CRM saw every list page twice, so one pass per workspace serves them
 * all. It holds what that takes: the boards, the snapshots the others shared as loaded, the
 * ones found unusable (read once only), each run's first ask in the workspace (the bound a
 * shared pass must meet) and an upper bound of Redis's clock lead (so a shared pass's age is
 * never under-counted). DriftCheck owns it and keeps its own reads; drift checks of plans never
 * see what is here.
 */
export class SharedBeforePasses {
  readonly #o: SharedBeforePassesOptions;
  readonly #own: OwnListReads;
  /** Before-value snapshots other processes of the workspace shared, as loaded, by resource (#loadShared). */
  readonly #shared = new Map<ListResource, Snapshot>();
  /** A shared snapshot read and not kept (unreadable, or stale already), by resource: its start, so it is read once only. */
  readonly #unusable = new Map<ListResource, number>();
  /** Per run: when a process of the workspace first asked for its before-values (Redis clock; stampRun). */
  readonly #runFirst = new Map<string, number>();
  readonly #boards = new Map<ListResource, LookupPassBoard>();
  readonly #token = randomBytes(8).toString('hex');
  /** Redis's clock less this process's, an upper bound (measured from board answers; #noteRedisClock). */
  #redisAhead: number | undefined;
  /** Before-value passes this process shared with the workspace's others, and theirs it loaded (logs, tests). */
  readonly sharing = { shared: 0, loaded: 0 };

  constructor(options: SharedBeforePassesOptions, own: OwnListReads) {
    this.#o = options;
    this.#own = own;
  }

  /** The workspace's board for the list; undefined without boards (each process reads its own). */
  board(resource: ListResource): LookupPassBoard | undefined {
    const make = this.#o.beforeBoards;
    if (!make) return undefined;
    let board = this.#boards.get(resource);
    if (!board) this.#boards.set(resource, (board = make(resource)));
    return board;
  }

  /**
   * The shared half of DriftCheck#beforeSnap: a pass agreed on the workspace's board (this
   * process's own or one another process shared) that may serve the run's before-values now,
   * begun no earlier than the run's first ask anywhere in the workspace (Redis clock, stampRun).
   */
  serving(resource: ListResource, runId: string): Snapshot | undefined {
    const first = this.#runFirst.get(runId);
    if (first === undefined) return undefined;
    for (const s of [this.#own.snaps.get(resource), this.#shared.get(resource)])
      if (s?.sharedAt !== undefined && s.sharedAt >= first && !this.#own.stale(s, 'before')) return s;
    return undefined;
  }

  /** The run's first ask in the workspace, once per run in this process (a failed ask is asked again next time). */
  async stampRun(runId: string, board: LookupPassBoard): Promise<void> {
    if (this.#runFirst.has(runId)) return;
    try {
      const asked = Date.now();
      const { first, now } = await board.runStart(runId);
      this.#noteRedisClock(now, asked);
      this.#runFirst.set(runId, first);
      for (const old of this.#runFirst.keys()) {
        if (this.#runFirst.size <= RUNS_REMEMBERED) break;
        this.#runFirst.delete(old);
      }
    } catch (err) {
      this.#log.debug(
        { runId, err: String(err) },
        'before-values: the run could not be stamped; this process reads its own passes',
      );
    }
  }

  /**
   * The board's pass for the run (#fromBoard), once the run is stamped; undefined when it is
   * not (the board did not answer) or the board cannot give one: the caller reads its own.
   */
  async forRun(resource: ListResource, board: LookupPassBoard, runId: string): Promise<Snapshot | undefined> {
    const first = this.#runFirst.get(runId);
    return first !== undefined ? await this.#fromBoard(resource, board, first) : undefined;
  }

  /**
   * `redisNow` answered a call sent at local time `sentAt`: Redis's clock less ours is at most
   * redisNow - sentAt. Kept as the latest such bound, so a shared pass's start in this
   * process's clock is never later than it was (its age never under-counted).
   */
  #noteRedisClock(redisNow: number, sentAt: number): void {
    this.#redisAhead = redisNow - sentAt;
  }

  /**
   * A fresh before-value pass of the workspace's, begun at or after `first` (Redis clock): one
   * shared, one this process is granted and runs (then shares), or one under way elsewhere,
   * waited for while its holder keeps its lease. Undefined when the board cannot give one
   * (Redis failing, a pass under way that began before `first`): the caller reads its own.
   * CRM errors of this process's own pass propagate.
   */
  async #fromBoard(resource: ListResource, board: LookupPassBoard, first: number): Promise<Snapshot | undefined> {
    // Another process's pass is waited for only so long: one killed mid-pass holds its grant a
    // lease (6 s), past the row's wait for its before-values (beforeReadWaitMs, 5 s), and rows
    // that go without them skip the reads for beforeReadPauseMs (30 s) — undo would lose them.
    const waitUntil = Date.now() + SHARED_PASS_WAIT_MS;
    for (;;) {
      let startedAt: number;
      try {
        const loaded = await this.#loadShared(resource, board, first);
        if (loaded) return loaded;
        const asked = Date.now();
        const turn = await board.ask(0, this.#token);
        this.#noteRedisClock(turn.kind === 'run' ? turn.startedAt : turn.now, asked);
        if (turn.kind === 'wait') {
          if (turn.passStartedAt === undefined || turn.passStartedAt < first) return undefined;
          if (Date.now() >= waitUntil) return undefined;
          await sleep(Math.min(turn.ms, SHARED_PASS_POLL_MS));
          continue;
        }
        startedAt = turn.startedAt;
        // A pass that ended between the look and the grant: its snapshot serves, the grant is handed back.
        const ended = await this.#loadShared(resource, board, first);
        if (ended) {
          await board.finish(this.#token, 0, undefined);
          return ended;
        }
      } catch (err) {
        this.#log.debug(
          { resource, err: String(err) },
          'before-values: the pass board did not answer; this process reads the list itself',
        );
        return undefined;
      }
      return this.#boardPass(resource, board, startedAt);
    }
  }

  /**
   * The workspace's last shared before-value pass, when it is newer than what this process has,
   * began at or after `first`, is readable (decodeBeforeSnapshot: of this workspace, CRM, list
   * and layout) and fresh: kept in #shared (replacing the last) and returned. One that cannot be
   * used is not read again.
   */
  async #loadShared(resource: ListResource, board: LookupPassBoard, first: number): Promise<Snapshot | undefined> {
    const ahead = this.#redisAhead;
    const meta = await board.snapshotMeta();
    if (ahead === undefined || !meta || meta.startedAt < first || this.#unusable.get(resource) === meta.startedAt)
      return undefined;
    const have = Math.max(this.#shared.get(resource)?.sharedAt ?? -1, this.#own.snaps.get(resource)?.sharedAt ?? -1);
    if (meta.startedAt <= have) return undefined;
    const body = await board.snapshotBody();
    const read = body && (await decodeBeforeSnapshot(body, this.#origin(board, resource, meta.startedAt)));
    if (!read) {
      this.#unusable.set(resource, meta.startedAt);
      if (body)
        this.#log.warn(
          { resource, bytes: body.length },
          'before-values: a shared snapshot could not be used; this process reads the list itself',
        );
      return undefined;
    }
    const snap: Snapshot = {
      startedAt: meta.startedAt - ahead,
      durationMs: read.durationMs,
      index: read.index,
      sharedAt: meta.startedAt,
    };
    if (this.#own.stale(snap, 'before')) {
      this.#unusable.set(resource, meta.startedAt);
      return undefined;
    }
    this.#shared.set(resource, snap);
    this.sharing.loaded++;
    // Memory: an own read that no check may use any more is dropped once a newer one serves before-values.
    const own = this.#own.snaps.get(resource);
    if (own && this.#own.stale(own, 'check')) this.#own.snaps.delete(resource);
    return snap;
  }

  /**
   * The pass the board granted this process (at `startedAt`, Redis clock): its lease renewed on
   * a timer until it is shared (a process killed mid-pass holds the others up one lease at
   * most). CRM errors propagate, and free the board for the next process's pass; a pass that
   * cannot be shared (too large, Redis failing) still serves this process.
   */
  async #boardPass(resource: ListResource, board: LookupPassBoard, startedAt: number): Promise<Snapshot> {
    const renewing = setInterval(() => {
      board.renew(this.#token).then(
        (held) =>
          held || this.#log.warn({ resource }, 'a before-value pass outlived its lease; another process runs the next'),
        () => undefined,
      );
    }, board.leaseMs / 3);
    try {
      let snap: Snapshot;
      try {
        snap = { ...(await this.#own.pass(resource)), sharedAt: startedAt };
      } catch (err) {
        await board.finish(this.#token, 0, undefined).catch(() => undefined);
        throw err;
      }
      this.#own.snaps.set(resource, snap);
      // Shared before it serves this process's rows: a board still held by a pass that is done
      // would send a process joining a newer run to read the list on its own (#fromBoard).
      await this.#share(resource, board, snap).catch((err: unknown) =>
        this.#log.debug({ resource, err: String(err) }, 'before-values: a pass could not be shared'),
      );
      return snap;
    } finally {
      clearInterval(renewing);
    }
  }

  /** Ends this process's pass on the board, its records the workspace's snapshot (unless too large). */
  async #share(resource: ListResource, board: LookupPassBoard, snap: Snapshot): Promise<void> {
    const encoded = await encodeBeforeSnapshot(
      this.#origin(board, resource, snap.sharedAt!),
      snap.durationMs,
      snap.index,
    ).catch((err: unknown) => ({ failed: String(err) }));
    if ('failed' in encoded)
      this.#log.debug({ resource, err: encoded.failed }, 'before-values: a pass could not be encoded');
    if ('tooLarge' in encoded)
      this.#log.warn(
        { resource, records: snap.index.size, ...encoded.tooLarge },
        'before-value snapshot too large to share: other processes read their own passes',
      );
    const body = 'body' in encoded ? encoded.body : undefined;
    if ((await board.finish(this.#token, 0, body)) && body) this.sharing.shared++;
  }

  #origin(board: LookupPassBoard, resource: ListResource, startedAt: number): BeforeSnapshotOrigin {
    return { workspace: board.workspace, crm: this.#o.client.baseUrl, resource, startedAt };
  }

  get #log(): Logger {
    return this.#o.logger ?? silentLogger;
  }
}

import type { RedisClient } from '../redis/index.js';
import { derivedSettings, type Config, type WorkspaceConfig } from '../config/index.js';
import { errorMessage } from '../errors/index.js';
import type { Logger } from '../log/index.js';
import type { MetricsRecorder } from '../metrics/index.js';
import { WorkBoard } from '../queue/index.js';
import type { RunStore } from '../runs/index.js';
import { createCrmClient } from '../runtime/index.js';
import { SyncWorker } from './sync-worker.js';
import type { SyncWorkerOptions } from './sync-worker-options.js';

/** The per-workspace settings every SyncWorker of the pool shares (the pool's own options, resolved). */
export type SharedWorkerOptions = Pick<
  SyncWorkerOptions,
  'lockDurationMs' | 'closeTimeoutMs' | 'maxStartedAttempts' | 'sweepIntervalMs' | 'producerSilenceMs' | 'history'
>;

/** A pool's roster, every setting resolved (startWorkerPool resolves the pool's options once). */
export interface WorkspaceRosterOptions {
  config: Config;
  logger: Logger;
  redis: RedisClient;
  store: RunStore;
  metrics: MetricsRecorder;
  /** Named with `-w`: only these are served. Default: every workspace of the config. */
  workspaces?: string[];
  /** Jobs in flight per active workspace. */
  concurrency: number;
  /** Settings every workspace's worker takes from the pool (lock, close timeout, sweeps). */
  shared: SharedWorkerOptions;
  /** How often the work board is read (ms). */
  pollMs: number;
  /** A workspace whose queue stayed empty (and had no running run) this long closes its worker (ms). */
  idleMs: number;
  /** Reads the config file again, for work signalled for a workspace it did not have. Default: none. */
  reloadConfig?: () => Config;
  /**
   * How often one process of the fleet looks in every served queue for jobs no one signalled
   * (an earlier version's, a hand retry; WorkBoard.sweep). Also once at start (ms).
   */
  queueSweepMs: number;
  /** A workspace whose worker could not start is tried again after this long (ms). */
  retryStartMs: number;
}

const RELOAD_EVERY_MS = 5000;

interface Active {
  worker: SyncWorker;
  /** Since when its queue was seen empty with nothing in flight here (epoch ms). */
  idleSince?: number;
  /** When its queue was last looked at (epoch ms): a busy fleet does not count queues every poll. */
  lookedAt?: number;
}

/**
 * Which workspaces this process holds a BullMQ worker for: only those the work board lists
 * (docs/architecture.md, "Idle workspaces"). A workspace with no jobs costs no connection and
 * no polling; once its queue stays empty for `idleMs`, its worker closes and the board forgets it.
 */
export class WorkspaceRoster {
  readonly #o: WorkspaceRosterOptions;
  readonly #board: WorkBoard;
  readonly #active = new Map<string, Active>();
  readonly #starting = new Map<string, Promise<void>>();
  /** Workspaces whose worker failed to start, and when to try again (epoch ms). */
  readonly #refused = new Map<string, number>();
  /** Unknown workspaces already warned about. */
  readonly #unknown = new Set<string>();
  #config: Config;
  #reloadedAt = 0;
  #sweptAt = 0;
  #timer: NodeJS.Timeout | undefined;
  #ticking: Promise<void> | undefined;
  /** A signal came while a tick was under way: one more tick after it. */
  #again = false;
  #unwatch: (() => void) | undefined;
  #closed = false;

  constructor(options: WorkspaceRosterOptions) {
    this.#o = options;
    this.#config = options.config;
    this.#board = new WorkBoard({ redis: options.redis, prefix: options.config.prefix });
  }

  get active(): ReadonlyMap<string, SyncWorker> {
    return new Map([...this.#active].map(([name, a]) => [name, a.worker]));
  }

  start(): void {
    const every = this.#o.pollMs;
    const loop = (): void => {
      this.#timer = setTimeout(() => {
        void this.tick().finally(() => {
          if (!this.#closed) loop();
        });
      }, every);
      this.#timer.unref();
    };
    this.#unwatch = this.#board.watch(
      () => this.#wake(),
      (err) => this.#o.logger.debug({ err: errorMessage(err) }, 'work signals not heard: the board is polled'),
    );
    void this.tick().finally(loop);
  }

  /** One look at the board: start workers for listed workspaces, close idle ones. Never throws. */
  tick(): Promise<void> {
    this.#ticking ??= this.#tick().finally(() => {
      this.#ticking = undefined;
      if (this.#again) {
        this.#again = false;
        this.#wake();
      }
    });
    return this.#ticking;
  }

  /** A workspace was signalled: look at the board now (after the tick under way, if one is). */
  #wake(): void {
    if (this.#closed) return;
    if (this.#ticking) this.#again = true;
    else void this.tick();
  }

  async #tick(): Promise<void> {
    if (this.#closed) return;
    let listed: Map<string, string>;
    try {
      await this.#sweep();
      listed = await this.#board.listed();
    } catch (err) {
      // Redis is away: the connection's own watchdog says so; the next tick tries again.
      this.#o.logger.debug({ err: errorMessage(err) }, 'work board not read');
      return;
    }
    for (const name of listed.keys()) {
      if (this.#active.has(name) || this.#starting.has(name) || !this.#serves(name)) continue;
      const refusedUntil = this.#refused.get(name);
      if (refusedUntil !== undefined && refusedUntil > Date.now()) continue;
      const started = this.#activate(name).finally(() => this.#starting.delete(name));
      this.#starting.set(name, started);
    }
    await Promise.all(
      [...this.#active].map(([name, a]) =>
        this.#maybeRetire(name, a, listed.get(name)).catch((err: unknown) =>
          this.#o.logger.debug({ workspace: name, err: errorMessage(err) }, 'idle check failed'),
        ),
      ),
    );
  }

  async #sweep(): Promise<void> {
    const every = this.#o.queueSweepMs;
    if (Date.now() - this.#sweptAt < every) return;
    this.#sweptAt = Date.now();
    // A pool named to a few workspaces looks at them itself; pools serving all share one sweep.
    const served = this.#o.workspaces ?? Object.keys(this.#config.workspaces);
    const found = await this.#board.sweep(served, this.#o.workspaces ? undefined : every);
    if (found !== null) {
      // A running run needs a worker even with nothing queued: its sweep fails a run whose
      // producer died before it signalled (FailedJobSweep, producerSilenceMs).
      const { runs } = await this.#o.store.listRuns({ status: 'running', limit: 1000 });
      const orphans = [...new Set(runs.map((r) => r.workspace))].filter((w) => served.includes(w));
      for (const w of orphans) await this.#board.signal(w);
    }
    if (found?.length)
      this.#o.logger.info(
        { workspaces: found.length },
        `jobs found waiting without a signal: ${found.slice(0, 10).join(', ')}`,
      );
  }

  #serves(name: string): boolean {
    if (this.#o.workspaces) return this.#o.workspaces.includes(name);
    if (this.#config.workspaces[name]) return true;
    this.#reload();
    if (this.#config.workspaces[name]) return true;
    if (!this.#unknown.has(name)) {
      this.#unknown.add(name);
      this.#o.logger.warn(
        { workspace: name },
        `jobs are queued for workspace ${name}, which ${this.#config.source ?? "this worker's config"} does not have: add it there (it is read again without a restart)`,
      );
    }
    return false;
  }

  /** Takes new and changed workspace entries from the config file (at most every 5 s). */
  #reload(): void {
    if (!this.#o.reloadConfig || Date.now() - this.#reloadedAt < RELOAD_EVERY_MS) return;
    this.#reloadedAt = Date.now();
    try {
      const next = this.#o.reloadConfig();
      const added = Object.keys(next.workspaces).filter((n) => !this.#config.workspaces[n]);
      // Only workspace entries change: Redis, the prefix and the rest stay what the process started with.
      this.#config = { ...this.#config, workspaces: next.workspaces };
      if (added.length > 0)
        this.#o.logger.info({ added: added.length }, `config read again: ${added.join(', ')} added`);
      for (const n of added) this.#unknown.delete(n);
    } catch (err) {
      this.#o.logger.error({ err: errorMessage(err) }, 'config not read again (keeping the one in use)');
    }
  }

  async #activate(name: string): Promise<void> {
    const concurrency = this.#o.concurrency;
    let ws: WorkspaceConfig | undefined;
    let client: ReturnType<typeof createCrmClient> | undefined;
    try {
      this.#reload();
      ws = this.#config.workspaces[name];
      if (!ws) return;
      client = createCrmClient(this.#config, name, this.#o.logger, { maxSockets: concurrency });
      const worker = await SyncWorker.start({
        workspace: name,
        client,
        store: this.#o.store,
        connection: this.#o.redis,
        prefix: this.#config.prefix,
        concurrency,
        ...(ws.rateLimit ? { rateLimit: ws.rateLimit } : {}),
        retry: ws.retry,
        createSettleMs: ws.createSettleMs,
        driftMaxAgeMs: ws.driftMaxAgeMs,
        readBefore: ws.readBefore,
        beforeMaxAgeMs: ws.beforeMaxAgeMs,
        retentionMs: derivedSettings({ retention: this.#config.retention }).retentionMs,
        automationFields: ws.automationFields,
        breaker: ws.breaker,
        outageWarningMs: ws.outageWarningMs,
        writeLeaseMs: derivedSettings({ requestTimeoutMs: ws.requestTimeoutMs }).writeLeaseMs,
        ...this.#o.shared,
        logger: this.#o.logger,
        metrics: this.#o.metrics,
      });
      if (this.#closed) {
        await worker.close();
        return;
      }
      this.#active.set(name, { worker });
      this.#refused.delete(name);
    } catch (err) {
      client?.close();
      this.#refused.set(name, Date.now() + this.#o.retryStartMs);
      this.#o.logger.error(
        { workspace: name, err: errorMessage(err) },
        `workspace ${name}: its worker did not start; trying again in ${Math.round(this.#o.retryStartMs / 1000)} s`,
      );
    }
  }

  /**
   * Closes the worker of a workspace with nothing left to do here: no job in flight in this
   * process, an empty queue and no running run (a producer may still be reading) for `idleMs`,
   * and the board either no longer lists it or agrees to forget it. `seen` is the board's count
   * read before the queue was looked at: a producer bumps it after adding jobs, so a settle that
   * races an enqueue fails and the worker stays.
   */
  async #maybeRetire(name: string, a: Active, seen: string | undefined): Promise<void> {
    const idleMs = this.#o.idleMs;
    const now = Date.now();
    if (a.worker.busy > 0) {
      a.idleSince = undefined;
      return;
    }
    if (a.lookedAt !== undefined && now - a.lookedAt < Math.min(5000, idleMs / 2)) return;
    a.lookedAt = now;
    if (!(await queueIsEmpty(a.worker))) {
      a.idleSince = undefined;
      return;
    }
    a.idleSince ??= now;
    if (now - a.idleSince < idleMs) return;
    const running = await this.#o.store.listRuns({ workspace: name, status: 'running', limit: 0 });
    if (running.total > 0) return;
    if (seen !== undefined && !(await this.#board.settle(name, seen))) return;
    this.#active.delete(name);
    this.#o.logger.info({ workspace: name }, 'workspace idle: its worker closed');
    await a.worker.close();
  }

  async close(): Promise<void> {
    this.#closed = true;
    clearTimeout(this.#timer);
    this.#unwatch?.();
    // A worker still starting closes itself when its start returns (it sees #closed); waiting
    // for it is bounded, since a start waits on Redis, which may be what is gone.
    await Promise.race([
      Promise.allSettled([...this.#starting.values()]),
      new Promise((resolve) => setTimeout(resolve, 2000).unref()),
    ]);
    await Promise.all([...this.#active.values()].map((a) => a.worker.close()));
    this.#active.clear();
  }
}

async function queueIsEmpty(worker: SyncWorker): Promise<boolean> {
  const counts = await worker.queue.getJobCounts('wait', 'delayed', 'prioritized', 'active', 'waiting-children');
  return Object.values(counts).every((n) => n === 0);
}

// What `crm-sync import` does, loaded by import-command.ts only when the command runs (its options
// and help are declared there).
import type { Command } from 'commander';
import { isRunOnly, OPERATIONS, RECONCILE_OPERATIONS, runShape, syncOf, type Operation } from '../crm/light.js';
import { readMappingFile, type Source } from '../ingest/index.js';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  currentGeneration,
  evicts,
  isEvictionReason,
  readEviction,
  redisLostDataSince,
  type EvictionState,
} from '../redis/index.js';
import {
  checkImportApproval,
  followRun,
  importFile,
  RunGoneError,
  settledRun,
  type GoneCause,
} from '../lifecycle/index.js';
import { workspaceRequestBudget } from '../rate/index.js';
import { referenceStoreOf, workspaceReferenceLoader } from '../references/index.js';
import type { RunRecord, RunStore } from '../runs/index.js';
import { isReconcileOperation, reconcileImport, type ReconcileOperation } from '../reconcile/index.js';
import { CrmSyncError, isCrmSyncError } from '../errors/index.js';
import { createCrmClient, openRuntime, type Runtime } from '../runtime/index.js';
import { evictedReason, startWorkerPool, type WorkerPool } from '../worker/index.js';
import { DEFAULTS, derivedSettings, getWorkspace } from '../config/index.js';
import { cliContext, type CliContext } from './context.js';
import { openImportSource, type ImportSourceOptions } from './import-source.js';

import { QueuePresenceWatch } from './queue-presence.js';
import { RedisHealthWatch } from './redis-health-watch.js';
import { exitCodeFor, formatRunSummary, warnIfNoWorkers } from './run-progress.js';
import { onShutdown } from './shutdown.js';
import { firstProblems, printSourceNotes, referenceProblemLines } from './source-notes.js';

export interface ImportOptions extends ImportSourceOptions {
  op: Operation;
  workspace: string;
  mapping?: string;
  ignoreUnknownColumns?: boolean;
  dryRun?: boolean;
  wait?: boolean;
  work?: boolean;
  // Options with a default are always set by commander (import-command.ts, from DEFAULTS).
  concurrency: number;
  batchSize: number;
  highWater: number;
  /** Seconds Redis may not answer while producing and following. */
  redisOutage: number;
  json?: boolean;
  reconcile?: boolean;
  match?: string;
  keyColumn?: string;
  upsert?: boolean;
  /** A short name for the run (--name), shown by the dashboard. */
  name?: string;
}

/** `import`: what the command does, loaded when it runs (see import-command.ts for its options). */
export async function runImport(file: string | undefined, opts: ImportOptions, command: Command): Promise<void> {
  const { config, logger } = cliContext(command);
  const ws = getWorkspace(config, opts.workspace);
  const op = importOperation(opts);
  // Before the source is opened (stdin is not spooled for nothing): in a workspace that requires
  // approval an import is refused, with the plan that does it instead.
  refuseUnapproved(file, op, opts, ws.requireApproval);
  const mapping = opts.mapping ? readMappingFile(opts.mapping) : undefined;
  const source = await openImportSource(file, opts, config.resultsDir);
  let runStarted = false;
  try {
    await importSource(source, op, mapping, opts, { config, logger }, () => (runStarted = true));
  } catch (err) {
    // A copy of stdin that no run reads (columns refused, Redis down) is not kept until
    // retention: piped rows may be personal data.
    const note = await source.close({ used: runStarted });
    if (note !== undefined) process.stderr.write(`${note}\n`);
    throw err;
  }
}

/**
 * An import in a workspace with `"requireApproval": true` (checkImportApproval: nothing read or
 * sent, APPROVAL_REQUIRED, exit 2); with --json the refusal is also one JSON document on stdout.
 */
function refuseUnapproved(
  file: string | undefined,
  op: Operation | ReconcileOperation,
  opts: ImportOptions,
  requireApproval: boolean,
): void {
  try {
    checkImportApproval({
      workspace: opts.workspace,
      requireApproval,
      op,
      ...(opts.dryRun ? { dryRun: true } : {}),
      planArgs: planArgsOf(file, opts),
    });
  } catch (err) {
    if (opts.json && isCrmSyncError(err))
      process.stdout.write(`${JSON.stringify({ error: { code: err.code, message: err.message } }, null, 2)}\n`);
    throw err;
  }
}

/** The import's source and reading options as `crm-sync plan` takes them. */
function planArgsOf(file: string | undefined, opts: ImportOptions): string {
  const parts: string[] = [];
  if (opts.query !== undefined) {
    parts.push('--query <the same query>');
    if (opts.dbUrlEnv) parts.push('--db-url-env', shellWord(opts.dbUrlEnv));
    if (opts.dbUrlFile) parts.push('--db-url-file', shellWord(opts.dbUrlFile));
    if (opts.rowKey) parts.push('--row-key', shellWord(opts.rowKey));
  } else parts.push(shellWord(file ?? '-'));
  if (opts.match) parts.push('--match', shellWord(opts.match));
  if (opts.keyColumn) parts.push('--key-column', shellWord(opts.keyColumn));
  if (opts.mapping) parts.push('--mapping', shellWord(opts.mapping));
  if (opts.format) parts.push('--format', opts.format);
  if (opts.delimiter) parts.push('--delimiter', shellWord(opts.delimiter));
  if (opts.ignoreUnknownColumns) parts.push('--ignore-unknown-columns');
  return parts.join(' ');
}

/** The operation a run gets; reconcile options that do not fit the operation are refused first. */
function importOperation(opts: ImportOptions): Operation | ReconcileOperation {
  const reconciled = opts.reconcile || opts.upsert || opts.match !== undefined;
  // --upsert runs the sync of the operation's resource (deal.* → deal.upsert), where there is one.
  const op = opts.upsert ? syncOf(opts.op) : opts.op;
  if (reconciled && (op === undefined || !isReconcileOperation(op))) {
    // Said from the operation table, so the list never goes stale.
    const reconciles = RECONCILE_OPERATIONS.filter((o) => !isRunOnly(o)).join(', ');
    const upserts = OPERATIONS.filter((o) => syncOf(o) !== undefined).join(', ');
    throw new CrmSyncError(
      'USAGE',
      `--reconcile works with ${reconciles} (and --upsert with ${upserts}), not ${opts.op}`,
    );
  }
  return op ?? opts.op;
}

/** What an import holds while it runs: Redis, its workers (--work), and what it watches. */
interface ImportParts {
  runtime: Runtime;
  /** What Redis held at the start: if the run is gone later, a different generation says Redis lost it. */
  generation: string | undefined;
  health: RedisHealthWatch;
  pool: WorkerPool | null;
  seen: LastSeen;
  evictions: EvictionStop;
  /** The run while its source is read: an interrupt then fails it (its unread rows would stay queued). */
  producing: { runId?: string };
}

async function importSource(
  source: Source,
  op: Operation | ReconcileOperation,
  mapping: ReturnType<typeof readMappingFile> | undefined,
  opts: ImportOptions,
  ctx: CliContext,
  onRunStarted: () => void,
): Promise<void> {
  const parts = await openImportParts(ctx, opts);
  const removeHandlers = failRunOnInterrupt(parts, op, source, opts);
  try {
    const run = await produceImport(parts, source, op, mapping, opts, ctx, (r, how) => {
      parts.producing.runId = r.id;
      parts.seen.follow(r);
      onRunStarted();
      ctx.logger.info({ runId: r.id, workspace: r.workspace, op: r.operation }, `run ${r.id} started${how}`);
    });
    parts.producing = {};
    await followImport(parts, run, opts);
  } catch (err) {
    throw await goneWords(err, parts, ctx, source, opts);
  } finally {
    parts.seen.stop();
    removeHandlers();
    await parts.pool?.close();
    await parts.runtime.close();
  }
}

/** Redis, the health watch from the start on, and with --work the workers. */
async function openImportParts({ config, logger }: CliContext, opts: ImportOptions): Promise<ImportParts> {
  const runtime = await openRuntime(config, logger);
  const generation = await currentGeneration(runtime.redis, config.prefix).catch(() => undefined);
  // Evictions from now on (Redis switched to evicting mid-run) end the follow with REDIS_EVICTS.
  const health = new RedisHealthWatch(runtime.store, opts.workspace);
  await health.begin().catch(() => undefined);
  let pool: WorkerPool | null = null;
  try {
    if (opts.work && !opts.dryRun)
      pool = await startWorkerPool({ config, logger, workspaces: [opts.workspace], concurrency: opts.concurrency });
  } catch (err) {
    // A worker that cannot start (SECRET_MISSING, a refused key) must not leave this
    // command waiting on its open Redis connection.
    await runtime.close();
    throw err;
  }
  const seen = new LastSeen(runtime.store);
  const onWireMs = getWorkspace(config, opts.workspace).requestTimeoutMs;
  const evictions = new EvictionStop(runtime.store, opts.workspace, health, seen, onWireMs);
  return { runtime, generation, health, pool, seen, evictions, producing: {} };
}

/**
 * While the file is still being read, an interrupted import would leave a run that stays
 * "running" forever (its unread rows never get a result): it is marked failed, with the reason.
 * Returns what removes the handlers.
 */
function failRunOnInterrupt(
  parts: ImportParts,
  op: Operation | ReconcileOperation,
  source: Source,
  opts: ImportOptions,
): () => void {
  return onShutdown(
    async (signal) => {
      const { runId } = parts.producing;
      if (runId !== undefined) {
        // Best effort: Redis may not answer at all (a partition).
        await parts.runtime.store
          .setStatus(
            runId,
            'failed',
            `interrupted (${signal}) while reading the ${source.noun}; rows not read were not sent: ` +
              afterInterrupt(runId, op, source, opts),
          )
          .catch(() => undefined);
      }
      await parts.pool?.close();
      await parts.runtime.close();
      process.exit(130);
    },
    {
      forceAfterMs: derivedSettings({ closeTimeoutsMs: parts.pool ? [DEFAULTS.worker.closeTimeoutMs] : [] })
        .forceExitAfterMs,
    },
  );
}

/** Reads the source into a new run: a reconciled import (matched against the CRM first) or a plain one. */
async function produceImport(
  parts: ImportParts,
  source: Source,
  op: Operation | ReconcileOperation,
  mapping: ReturnType<typeof readMappingFile> | undefined,
  opts: ImportOptions,
  { config, logger }: CliContext,
  started: (run: RunRecord, how: string) => void,
): Promise<RunRecord> {
  const { runtime, seen, evictions } = parts;
  const reconciled = opts.reconcile || opts.upsert || opts.match !== undefined;
  const client = reconciled ? createCrmClient(config, opts.workspace, logger) : null;
  // What a plain import and a reconciled one share: where rows go and how the source reads.
  const common = {
    file: source,
    workspace: opts.workspace,
    queue: runtime.queue(opts.workspace),
    store: runtime.store,
    ...(mapping ? { mapping } : {}),
    ...(opts.ignoreUnknownColumns ? { ignoreUnknownColumns: true } : {}),
    onChecked: printSourceNotes,
    ...(opts.name !== undefined ? { label: opts.name } : {}),
    dryRun: Boolean(opts.dryRun),
    highWaterMark: opts.highWater,
    rowsPerJob: getWorkspace(config, opts.workspace).rowsPerJob,
    logger,
  };
  const { run } =
    client && isReconcileOperation(op)
      ? await reconcileImport({
          ...common,
          op,
          client,
          budget: workspaceRequestBudget(runtime.redis, config, opts.workspace, client),
          references: {
            store: referenceStoreOf(config, opts.workspace, runtime.redis),
            maxAgeMs: getWorkspace(config, opts.workspace).referencesMaxAgeMs,
          },
          ...(opts.match ? { matchKey: opts.match } : {}),
          ...(opts.keyColumn ? { keyColumn: opts.keyColumn } : {}),
          onRun: (r) => started(r, ' (reconciled)'),
        }).finally(() => client.close())
      : await importFile({
          ...common,
          op: opts.op,
          inviteBatchSize: opts.batchSize,
          loadReferences: workspaceReferenceLoader({
            config,
            workspace: opts.workspace,
            redis: runtime.redis,
            logger,
          }),
          onRun: (r) => started(r, ''),
          onProgress: (p) => (seen.handed = p.queued),
          redisOutageMs: opts.redisOutage * 1000,
          ...(opts.dryRun ? {} : { redisWatch: () => evictions.watch() }),
        });
  return run;
}

/** Follows the run when asked (--wait, --work, a dry run), then prints its summary and sets the exit code. */
async function followImport(parts: ImportParts, run: RunRecord, opts: ImportOptions): Promise<void> {
  const { runtime, health, seen } = parts;
  const following = Boolean(opts.wait || opts.work || opts.dryRun);
  if (!following && !opts.dryRun && run.counts.queued > 0) await warnIfNoWorkers(runtime.store, opts.workspace);
  const presence = new QueuePresenceWatch(runtime.store, opts.workspace);
  seen.stop();
  const final = following
    ? await followRun(runtime.store, run.id, {
        quiet: Boolean(opts.json),
        redisOutageMs: opts.redisOutage * 1000,
        ...(opts.dryRun ? {} : { presence, health }),
      })
    : run.status === 'cancelled'
      ? // Cancelled while it read: its last line counts the rows still landing once they have.
        await settledRun(runtime.store, run)
      : run;
  // Failed by the workers because Redis evicted keys: said in the same words as when this
  // command noticed it first (goneWords waits out requests on the wire first, so the way on it
  // prints is safe at once).
  if (final.status === 'failed' && isEvictionReason(final.reason) && !opts.dryRun)
    throw new RunGoneError({
      runId: run.id,
      lastSeen: final,
      lastSeenAt: new Date(),
      cause: {
        kind: 'evicted',
        // Not settings: when the workers saw the eviction and this command's watch did not, it
        // knows no policy and saw no key go.
        policy: health.evicted?.policy ?? 'unknown',
        evictedKeys: health.evicted?.evictedKeys ?? 0,
      },
    });
  if (opts.json) process.stdout.write(`${JSON.stringify(final, null, 2)}\n`);
  else {
    process.stdout.write(`${formatRunSummary(final)}\n`);
    const named = await referenceProblemLines(runtime.store, final).catch(() => []);
    if (named.length > 0) process.stdout.write(`${named.join('\n')}\n`);
  }
  if (opts.dryRun && !opts.json && final.counts.invalid + final.counts.failed > 0) {
    process.stdout.write(`first problem rows:\n${(await firstProblems(runtime.store, final)).join('\n')}\n`);
  }
  if (!following) {
    // --json output stays one JSON document for scripts.
    if (!opts.json) process.stdout.write(`  queued; follow it with: crm-sync runs show ${run.id}\n`);
    process.exitCode = final.counts.invalid > 0 || final.status === 'cancelled' ? 1 : 0;
  } else {
    process.exitCode = exitCodeFor(final);
  }
}

/**
 * The error an import ends with. The run this command produced is gone from Redis: said so, with
 * what was sent and a safe way on (RunGoneError); anything else as it is.
 */
async function goneWords(
  err: unknown,
  parts: ImportParts,
  { config }: CliContext,
  source: Source,
  opts: ImportOptions,
): Promise<unknown> {
  const { seen, health } = parts;
  const runId = seen.runId;
  const gone = err instanceof RunGoneError || (isCrmSyncError(err) && err.code === 'RUN_NOT_FOUND');
  if (runId === undefined || !gone) return err;
  const last = err instanceof RunGoneError ? err.facts : undefined;
  const lastSeen = newer(seen.run, last?.lastSeen);
  const lastSeenAt = lastSeen !== undefined && lastSeen === last?.lastSeen ? last.lastSeenAt : seen.at;
  const found = await goneCause(parts.runtime.store, config.prefix, parts.generation, health);
  const cause = found.kind !== 'evicted' && last?.cause.kind === 'evicted' ? last.cause : found;
  if (cause.kind === 'evicted')
    await parts.evictions.halt(runId, { policy: cause.policy, evictedKeys: cause.evictedKeys });
  return new RunGoneError({
    runId,
    cause,
    importCommand: importCommandOf(source, opts),
    ...(lastSeen ? { lastSeen } : {}),
    ...(lastSeenAt ? { lastSeenAt } : {}),
    ...(seen.handed !== undefined ? { handed: seen.handed } : {}),
  });
}

/**
 * Redis evicted keys while this command produced or followed its run: the run is failed by its
 * own key (REDIS_EVICTS; its entries in the run indexes may be gone, so the workers' watch may
 * not find it), which stops every worker sending its rows (the write fence refuses them), and
 * this command waits out the requests already on the wire. Then the way on it prints (for
 * creates, a reconciled import) meets no row of this run still being sent: safe at once.
 */
class EvictionStop {
  #halted = false;

  constructor(
    private readonly store: RunStore,
    private readonly workspace: string,
    private readonly health: RedisHealthWatch,
    private readonly seen: LastSeen,
    private readonly onWireMs: number,
  ) {}

  async halt(runId: string, evicted: EvictionState): Promise<void> {
    if (this.#halted) return;
    this.#halted = true;
    const run = (await this.store.getRun(runId).catch(() => null)) ?? this.seen.run;
    if (run && !(run.status === 'failed' && isEvictionReason(run.reason)))
      await this.store
        .failByRef(
          { id: runId, workspace: this.workspace },
          evictedReason(run, evicted, evicted.evictedKeys, this.onWireMs),
        )
        .catch(() => false);
    process.stderr.write(
      `Redis evicted keys while run ${runId} was under way [REDIS_EVICTS]: the run is failed, and no worker sends another of its rows; ` +
        `waiting ${Math.ceil(this.onWireMs / 1000)} s for requests already on the wire to end, so that what follows is safe to do at once\n`,
    );
    await sleep(this.onWireMs + 1000);
  }

  /**
   * What Redis says while the file is read (the producer's redisWatch): a line when it is full or
   * evicts keys; 'hold' while it evicts (rows queued now could vanish); once it evicted keys, the
   * run is stopped (exit 6).
   */
  async watch(): Promise<'go' | 'hold'> {
    const { health, seen } = this;
    const line = await health.look().catch(() => undefined);
    if (line !== undefined) process.stderr.write(`${line}\n`);
    const runId = seen.runId;
    if (health.evicted && runId !== undefined) {
      const cause = { kind: 'evicted' as const, ...health.evicted };
      await this.halt(runId, health.evicted);
      throw new RunGoneError({
        runId,
        cause,
        ...(seen.run ? { lastSeen: seen.run } : {}),
        ...(seen.at ? { lastSeenAt: seen.at } : {}),
      });
    }
    return health.evicting ? 'hold' : 'go';
  }
}

/**
 * The run as this command last read it while producing (once a second): when Redis loses the
 * run, these counts are all there is to say how many rows had been sent.
 */
class LastSeen {
  run: RunRecord | undefined;
  at: Date | undefined;
  /** Rows the producer had handed to the queue. */
  handed: number | undefined;
  #timer: NodeJS.Timeout | undefined;

  constructor(private readonly store: RunStore) {}

  get runId(): string | undefined {
    return this.run?.id;
  }

  follow(run: RunRecord): void {
    this.run = run;
    this.at = new Date();
    this.#timer = setInterval(() => {
      this.store
        .getRun(run.id)
        .then((r) => {
          if (r === null) return;
          this.run = r;
          this.at = new Date();
        })
        .catch(() => undefined);
    }, 1000);
    this.#timer.unref();
  }

  stop(): void {
    clearInterval(this.#timer);
  }
}

/** The later of two reads of one run (the one with more rows done). */
function newer(a: RunRecord | undefined, b: RunRecord | undefined): RunRecord | undefined {
  if (!a || !b) return a ?? b;
  return b.counts.total - b.counts.queued >= a.counts.total - a.counts.queued ? b : a;
}

/** Why the run is gone: Redis lost its generation, evicts keys, or neither can be told. */
async function goneCause(
  store: RunStore,
  prefix: string,
  generation: string | undefined,
  health: RedisHealthWatch,
): Promise<GoneCause> {
  // Evictions seen since the start come first: the generation marker may be one of the keys evicted.
  await health.look().catch(() => undefined);
  if (health.evicted)
    return { kind: 'evicted', policy: health.evicted.policy, evictedKeys: health.evicted.evictedKeys };
  if (generation !== undefined && (await redisLostDataSince(store.redis, prefix, generation))) return { kind: 'lost' };
  const eviction = await readEviction(store.redis);
  if (eviction && (evicts(eviction) || eviction.evictedKeys > 0))
    return { kind: 'evicted', policy: eviction.policy, evictedKeys: eviction.evictedKeys };
  return { kind: 'unknown' };
}

/**
 * How to send the rest of an interrupted import without sending twice what went: a file goes on
 * with `runs resume` (rows with a result are passed over); a reconciled run sends only what still
 * differs; creates from a query go again only reconciled (a plain import would make every deal
 * that went a second time).
 */
function afterInterrupt(
  runId: string,
  op: Operation | ReconcileOperation,
  source: Source,
  opts: ImportOptions,
): string {
  const shape = runShape(op);
  if (shape === 'sync' || opts.reconcile || opts.match !== undefined)
    return 'run the same reconciled import again (it sends only what still differs)';
  if (source.resumable && shape !== 'invite') return `go on from there with: crm-sync runs resume ${runId}`;
  if (shape === 'create')
    return `send the rest with a reconciled import, never a plain one (deals that went would be made twice): ${importCommandOf(source, opts)} --op ${op} --upsert --match name`;
  if (shape === 'invite')
    return 'import only the addresses the team does not have yet (invitations that went out would go out again)';
  return 'import it again';
}

/** The import's source and reading options as a command line, for advice on sending the rest. */
function importCommandOf(source: Source, opts: ImportOptions): string {
  const parts = ['crm-sync import'];
  parts.push(source.commandWords(shellWord));
  parts.push('-w', shellWord(opts.workspace));
  if (opts.mapping) parts.push('--mapping', shellWord(opts.mapping));
  if (opts.format) parts.push('--format', opts.format);
  if (opts.delimiter) parts.push('--delimiter', shellWord(opts.delimiter));
  if (opts.ignoreUnknownColumns) parts.push('--ignore-unknown-columns');
  return parts.join(' ');
}

function shellWord(word: string): string {
  return /^[\w./:@=-]+$/.test(word) ? word : `'${word.replaceAll("'", "'\\''")}'`;
}

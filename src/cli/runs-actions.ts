// What `crm-sync runs show|export|retry|prune|delete|cancel|resume` does, loaded by runs-command.ts
// only when the command runs (its options and help are declared there).
import { createWriteStream, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { finished } from 'node:stream/promises';
import { derivedSettings, getWorkspace, type Config } from '../config/index.js';
import type { Logger } from '../log/index.js';
import { heldPlanWords, PlanStore, replanDrifted } from '../plans/index.js';
import { removalCatchUp } from '../history/index.js';
import { workspaceRequestBudget } from '../rate/index.js';
import { formatPlanCounts } from '../reconcile/index.js';
import { createCrmClient, type Runtime } from '../runtime/index.js';
import { workspaceReferenceLoader } from '../references/index.js';
import type { Command } from 'commander';
import { CrmSyncError } from '../errors/index.js';
import {
  cancelRun,
  followRun,
  resumeProducer,
  settledRun,
  retryRows,
  writtenLaterWords,
  type ProducerProgress,
  type RetrySummary,
} from '../lifecycle/index.js';
import { pausedWords, resumeWorkspace } from '../queue/index.js';
import {
  ArchivedRuns,
  archivePath,
  archiveRun,
  runNotFoundHere,
  parseDuration,
  placeWords,
  plural,
  pruneRuns,
  writeResultsCsv,
  changeWords,
  type RowResult,
  type RunRecord,
  type RunResults,
  type RunStore,
} from '../runs/index.js';
import { withRuntime, withWorkers } from './context.js';
import { givenDialect, type ExportDialectOptions } from './options.js';
import { QueuePresenceWatch } from './queue-presence.js';
import { exitCodeFor, formatRunSummary, warnIfNoWorkers } from './run-progress.js';

/** Where a run's results are read from: Redis while it is there, else its archive (retention). */
export async function resultsOf(
  store: RunStore,
  resultsDir: string,
  id: string,
): Promise<{ source: RunResults; archived?: string }> {
  if ((await store.getRun(id)) !== null) return { source: store };
  const archived = new ArchivedRuns(resultsDir);
  if (!archived.has(id)) throw runNotFoundHere(resultsDir, id);
  return { source: archived, archived: archivePath(resultsDir, id) };
}

/** `runs show` */
/** `11 rows read again: 5 queued, 6 still invalid (not sent)`: what went to the queue, not what was read. */
export function retriedWords(p: { read: number; queued: number; invalid: number }): string {
  const rest = p.read - p.queued - p.invalid;
  const parts = [`${p.queued.toLocaleString('en-US')} queued`];
  if (p.invalid > 0) parts.push(`${p.invalid.toLocaleString('en-US')} still invalid (not sent)`);
  if (rest > 0) parts.push(`${rest.toLocaleString('en-US')} not queued`);
  return `${plural(p.read, 'row')} read again: ${parts.join(', ')}`;
}

/** A held tick's plan as it is now (approved and applied since, discarded, expired), or undefined for any other run. */
async function heldPlanNow(store: RunStore, run: RunRecord): Promise<ReturnType<typeof heldPlanWords> | undefined> {
  const planId = run.options.held?.planId;
  if (planId === undefined) return undefined;
  return heldPlanWords(planId, await new PlanStore({ redis: store.redis, prefix: store.prefix }).get(planId));
}

export async function showRun(
  id: string,
  opts: { problems: number; changes: number; json?: boolean },
  command: Command,
): Promise<void> {
  await withRuntime(command, async ({ runtime: { store }, config }) => {
    const { source, archived } = await resultsOf(store, config.resultsDir, id);
    const run = await source.requireRun(id);
    const problems = await source.problems(id, { limit: opts.problems });
    // Drifted rows are not problems (nothing failed) but need a person: listed with the CRM's values.
    if (run.counts.drifted > 0 && problems.rows.length < opts.problems) {
      for await (const r of source.iterateResults(id)) {
        if (r.status !== 'drifted') continue;
        problems.rows.push(r);
        if (problems.rows.length >= opts.problems) break;
      }
      problems.total += run.counts.drifted;
    }
    const changes = await writtenRows(source, id, opts.changes);
    const heldPlan = await heldPlanNow(store, run);
    // The names rows gave for the ids they sent: `stage_id "stg_4" -> "Negotiation" → stg_1`.
    const names = await source.names(id);
    if (opts.json) {
      const named = Object.keys(names).length > 0 ? { names } : {};
      process.stdout.write(
        `${JSON.stringify({ run, problems, changes, ...named, ...(heldPlan ? { heldPlan } : {}), ...(archived ? { archived } : {}) }, null, 2)}\n`,
      );
    } else {
      process.stdout.write(`${formatRunSummary(run, heldPlan)}\n`);
      if (archived) process.stdout.write(`  archived (no longer in Redis): ${archived}\n`);
      if (run.options.undoOf !== undefined) process.stdout.write(`  undoes run ${run.options.undoOf}\n`);
      if (run.undoneBy !== undefined) process.stdout.write(`  undone by run ${run.undoneBy.join(', ')}\n`);
      for (const c of changes)
        process.stdout.write(`  row ${c.row}: ${c.recordId ?? ''} ${changeWords(c.changes, names)}\n`);
      for (const p of problems.rows) {
        process.stdout.write(
          `  row ${p.row}${placeWords(p, run) ? ` (${placeWords(p, run)})` : ''}: ${p.status}${p.httpStatus ? ` HTTP ${p.httpStatus}` : ''}: ${p.message ?? ''}\n`,
        );
      }
      if (problems.total > problems.rows.length)
        process.stdout.write(`  … ${problems.total - problems.rows.length} more\n`);
    }
    process.exitCode = exitCodeFor(run);
  });
}

/** The first `n` rows that wrote something, with their values before and after (RowResult.changes). */
async function writtenRows(source: RunResults, id: string, n: number): Promise<RowResult[]> {
  const rows: RowResult[] = [];
  if (n <= 0) return rows;
  for await (const r of source.iterateResults(id)) {
    if (r.changes === undefined) continue;
    rows.push(r);
    if (rows.length >= n) break;
  }
  return rows;
}

/** `runs export` */
export async function exportRun(
  id: string,
  opts: { failed?: boolean; out?: string } & ExportDialectOptions,
  command: Command,
): Promise<void> {
  const how = { problemsOnly: Boolean(opts.failed), dialect: givenDialect(opts) };
  await withRuntime(command, async ({ runtime: { store }, config }) => {
    const { source } = await resultsOf(store, config.resultsDir, id);
    await source.requireRun(id);
    const sayMissing = (missing: string | undefined) => {
      if (missing !== undefined)
        process.stderr.write(`the input columns of rows without a problem are empty: ${missing}\n`);
    };
    if (opts.out === '-') {
      sayMissing((await writeResultsCsv(source, id, process.stdout, how)).inputNotShown);
      return;
    }
    let path = opts.out;
    if (!path) {
      mkdirSync(config.resultsDir, { recursive: true });
      path = join(config.resultsDir, `${id}${opts.failed ? '-failed' : ''}.csv`);
    }
    const out = createWriteStream(path);
    const { rows, inputNotShown } = await writeResultsCsv(source, id, out, how);
    out.end();
    await finished(out);
    process.stdout.write(`${plural(rows, 'row')} written to ${path}\n`);
    sayMissing(inputNotShown);
  });
}

/** `runs retry` */
export async function retryRunRows(
  id: string,
  opts: { file?: string; rows?: number[]; wait?: boolean; work?: boolean; resendSuperseded?: boolean },
  command: Command,
): Promise<void> {
  await withRuntime(command, async (scope) => {
    const { runtime, logger } = scope;
    const run = await runtime.store.requireRun(id);
    // A drifted row is not sent again as it was: the record changed since its plan, and only a
    // new plan (reviewed, approved) may write over that. Its rows are re-planned against the
    // CRM's values now; a retry from a file leaves them (said so).
    if (run.counts.drifted > 0 && run.options.plan !== undefined && !opts.file) {
      await replanDriftedRows(scope, run, opts.rows);
      // Nothing else of the run to send again: the new plan is all there is to do.
      const others = run.counts.failed + run.counts.invalid + run.counts.uncertain + run.counts.cancelled;
      if (others === 0 && !opts.rows) return;
    } else if (run.counts.drifted > 0)
      process.stderr.write(
        run.options.plan === undefined
          ? // A reconciled import's drifted rows: a person changed the record after the run read it.
            `${run.counts.drifted} drifted rows of run ${id} are not retried: their records changed after the run read ` +
              `the CRM. Run the reconciled import again (it diffs against the values now), or make a plan of the ` +
              `file to review first: crm-sync plan <file> --op ${run.operation} -w ${run.workspace}\n`
          : `${run.counts.drifted} drifted rows of run ${id} are not retried: their records changed after ` +
              `plan ${run.options.plan} was made. Make a new plan for them ` +
              `(crm-sync runs retry ${id} without --file re-plans them), review and approve it, then apply it.\n`,
      );
    await withWorkers(scope, { work: opts.work, workspace: run.workspace }, async () => {
      const summary = await retryRows({
        runId: id,
        config: scope.config,
        queueFor: (workspace) => runtime.queue(workspace),
        store: runtime.store,
        ...(opts.file ? { file: opts.file } : {}),
        ...(opts.rows ? { rows: opts.rows } : {}),
        ...(opts.resendSuperseded ? { resendSuperseded: true } : {}),
        logger,
      });
      if (opts.file && summary.progress.read === 0 && summary.ignoredCount > 0) {
        // Nothing in the file was this run's: a wrong file, not failed rows.
        const why = summary.ignored
          .slice(0, 3)
          .map((i) => `line ${i.line}: ${i.reason}`)
          .join('; ');
        throw new CrmSyncError(
          'USAGE',
          `no line of ${opts.file} is a failed, invalid, uncertain or cancelled row of run ${id} (${why}); nothing was queued`,
        );
      }
      process.stdout.write(`${retriedWords(summary.progress)}\n`);
      process.stdout.write(retryWrittenLaterLines(id, summary.writtenLater));
      if (!opts.work && !opts.wait && summary.progress.queued > 0) await warnIfNoWorkers(runtime.store, run.workspace);
      for (const i of summary.ignored.slice(0, 20))
        process.stdout.write(`  ignored line ${i.line}${i.row ? ` (row ${i.row})` : ''}: ${i.reason}\n`);
      const presence = new QueuePresenceWatch(runtime.store, run.workspace);
      const final = opts.wait || opts.work ? await followRun(runtime.store, id, { presence }) : summary.run;
      process.stdout.write(`${formatRunSummary(final)}\n`);
      process.exitCode = exitCodeFor(final);
    });
  });
}

/**
 * The drifted rows of a plan run as a new plan: the CRM's current values read in the workspace's
 * rate budget, as `crm-sync plan` reads them; prints its id and the commands that approve and apply it.
 */
async function replanDriftedRows(
  scope: { runtime: Runtime; config: Config; logger: Logger },
  run: RunRecord,
  rows: number[] | undefined,
): Promise<void> {
  const { runtime, config, logger } = scope;
  const ws = getWorkspace(config, run.workspace);
  const client = createCrmClient(config, run.workspace, logger);
  try {
    const result = await replanDrifted({
      plans: new PlanStore({ redis: runtime.redis, prefix: config.prefix }),
      store: runtime.store,
      run,
      client,
      budget: workspaceRequestBudget(runtime.redis, config, run.workspace, client),
      settings: { planTtlMs: ws.planTtlMs, driftMaxAgeMs: ws.driftMaxAgeMs, rateLimit: ws.rateLimit },
      ...(rows ? { rows: new Set(rows) } : {}),
      logger,
    });
    const { plan } = result;
    const lines: string[] = [];
    if (plan)
      lines.push(
        `${plan.rows} drifted rows of run ${run.id} re-planned against the CRM's values now ` +
          `(${result.pages} list requests; nothing sent): plan ${plan.id}: ${formatPlanCounts(plan.counts)}`,
        `  review: crm-sync plans show ${plan.id}   approve: crm-sync plans approve ${plan.id}   apply: crm-sync apply ${plan.id} --wait`,
      );
    else if (result.drifted === 0) lines.push(`no drifted row of run ${run.id} among the rows given; none re-planned`);
    if (result.creates > 0)
      lines.push(
        `${result.creates} drifted creates of run ${run.id} are not re-planned: a record matching each exists now; ` +
          `make a new plan from the source for them (crm-sync plan <file> --op ${run.operation} -w ${run.workspace})`,
      );
    process.stdout.write(`${lines.join('\n')}\n`);
  } finally {
    client.close();
  }
}

/** `runs prune` */
export async function pruneOldRuns(opts: { olderThan?: string; dryRun?: boolean }, command: Command): Promise<void> {
  await withRuntime(command, async ({ runtime: { store }, config, logger }) => {
    const olderThanMs = opts.olderThan ? parseDuration(opts.olderThan) : derivedSettings(config).retentionMs;
    const history = config.history && !opts.dryRun ? removalCatchUp(config.history, store, logger) : undefined;
    const s = await pruneRuns({
      store,
      resultsDir: config.resultsDir,
      olderThanMs,
      ...(opts.dryRun ? { dryRun: true } : {}),
      ...(history ? { beforeDelete: history.beforeDelete } : {}),
    }).finally(() => history?.close());
    const verb = opts.dryRun ? 'would archive and remove' : 'archived and removed';
    process.stdout.write(
      `${verb} ${s.runs.length} runs${opts.dryRun ? '' : ` (${s.archivedRows} result rows)`}, ${s.files.length} old files (CSV files, copies of stdin); ${s.kept.length} old runs still running or blocked were left alone\n`,
    );
    for (const id of s.runs.slice(0, 50)) process.stdout.write(`  ${id}\n`);
  });
}

/** `runs delete` */
export async function deleteRun(id: string, opts: { archive: boolean }, command: Command): Promise<void> {
  await withRuntime(command, async ({ runtime: { store }, config, logger }) => {
    const run = await store.requireRun(id);
    if (run.status === 'running' || run.status === 'blocked')
      throw new CrmSyncError('RUN_STATE', `run ${id} is ${run.status}: cancel it first (crm-sync runs cancel ${id})`);
    const archived = opts.archive ? await archiveRun(store, id, config.resultsDir) : undefined;
    if (config.history) {
      const history = removalCatchUp(config.history, store, logger);
      await history.beforeDelete(run).finally(() => history.close());
    }
    await store.deleteRun(id);
    process.stdout.write(
      `run ${id} removed from Redis${archived ? `; ${archived.rows} results archived to ${archived.path}` : ''}\n`,
    );
  });
}

/** `runs cancel` */
export async function cancelRunNow(id: string, opts: { reason: string }, command: Command): Promise<void> {
  await withRuntime(command, async ({ runtime: rt }) => {
    const {
      run: after,
      removed,
      inDoubt,
    } = await cancelRun({
      store: rt.store,
      queueFor: (workspace) => rt.queue(workspace),
      runId: id,
      reason: opts.reason,
    });
    // What this command removed is only part of what the run ends with: say where the rest comes from.
    process.stdout.write(
      [
        `run ${id} cancelled:`,
        `  removed from the queue: ${removed} waiting ${removed === 1 ? 'row' : 'rows'}, recorded cancelled`,
        `  rows workers had taken: recorded cancelled at their next request`,
        `    (requests already on the wire finish)`,
        `  rows the producer still holds or queues: recorded cancelled as it stops`,
        ...(inDoubt > 0
          ? [
              `  creates in doubt: ${inDoubt} (their answer was lost: they may have made their deal); never recorded "not sent": ` +
                `each finishes its look-up and is recorded with its deal, or uncertain ("crm-sync runs retry ${id}" resolves those; do not import them again)`,
            ]
          : []),
      ].join('\n') + '\n',
    );
    // The summary is the run's final count once those rows have landed, not this moment's.
    const final = await settledRun(rt.store, after);
    process.stdout.write(`${formatRunSummary(final)}\n`);
    if (final.counts.queued > 0)
      process.stdout.write(`  ${final.counts.queued} rows are still being recorded: see crm-sync runs show ${id}\n`);
  });
}

/** `runs resume` */
export async function resumeRun(id: string, command: Command): Promise<void> {
  await withRuntime(command, async ({ runtime: rt, logger }) => {
    const run = await rt.store.requireRun(id);
    if (run.status === 'completed' || (run.status === 'failed' && run.producerDone)) {
      throw new CrmSyncError(
        'RUN_STATE',
        `run ${id} is ${run.status} and its file was read to the end: nothing to resume (failed rows: crm-sync runs retry ${id})`,
      );
    }
    if (run.status !== 'blocked' && !run.producerDone) {
      const { run: resumed, progress } = await resumeProducer({
        runId: id,
        queue: rt.queue(run.workspace),
        store: rt.store,
        logger,
        loadReferences: workspaceReferenceLoader({
          config: rt.config,
          workspace: run.workspace,
          redis: rt.redis,
          logger,
        }),
      });
      process.stdout.write(`run ${id}: ${resumeWords(progress)}; the file is read to the end\n`);
      process.stdout.write(`${formatRunSummary(resumed)}\n`);
      return;
    }
    const resumed = await resumeWorkspace({
      queue: rt.queue(run.workspace),
      store: rt.store,
      workspace: run.workspace,
    });
    const { paused } = await rt.store.holds(run.workspace);
    process.stdout.write(
      `block of workspace ${run.workspace} lifted; runs resumed: ${resumed.join(', ') || 'none were blocked'}\n`,
    );
    if (paused)
      process.stdout.write(
        `the workspace stays ${pausedWords(paused.reason)}: crm-sync workspace resume -w ${run.workspace}\n`,
      );
  });
}

/** What a retry did with rows a later run had already written: said before anything is sent. */
export function retryWrittenLaterLines(id: string, w: RetrySummary['writtenLater']): string {
  const hint = `"crm-sync runs retry ${id} --resend-superseded" writes them over the later values`;
  return writtenLaterWords(w, hint)
    .map((l) => `${l}\n`)
    .join('');
}

/**
 * What a resume did, in two numbers kept apart: rows the earlier producer had not read, and its
 * rows with no result yet that went to the queue again (not counted twice). One sum read as
 * "2211 more rows read" when only 1,000 rows were left unread.
 */
export function resumeWords(progress: ProducerProgress): string {
  const fresh = progress.read - progress.again;
  const words = [
    `${fresh} rows not read before were read now (${progress.queued - progress.again} queued, ${progress.invalid} invalid)`,
  ];
  if (progress.again > 0)
    words.push(
      `${progress.again} earlier rows that had no result yet were queued again (counted once: a row in two jobs is still sent once)`,
    );
  return words.join('; ');
}

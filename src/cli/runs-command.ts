import { createWriteStream, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { finished } from 'node:stream/promises';
import { Option, type Command } from 'commander';
import { CrmSyncError } from '../errors/index.js';
import { cancelRun, resumeProducer, resumeWorkspace, retryRun } from '../queue/index.js';
import {
  ArchivedRuns,
  archivePath,
  archiveRun,
  parseDuration,
  placeWords,
  pruneRuns,
  writeResultsCsv,
  type RunRecord,
  type RunResults,
  type RunStatus,
  type RunStore,
} from '../runs/index.js';
import { withRuntime, withWorkers } from './context.js';
import { positiveInt, rowList } from './options.js';
import { QueuePresenceWatch } from './queue-presence.js';
import { exitCodeFor, followRun, formatRunSummary, warnIfNoWorkers } from './run-progress.js';

function runLine(r: RunRecord): string {
  const c = r.counts;
  const line = [
    r.id,
    r.status.padEnd(9),
    r.workspace,
    r.operation,
    r.syncName ?? '-',
    `${c.succeeded}/${c.total} ok`,
    `${c.failed} failed`,
    `${c.invalid} invalid`,
    `${c.skipped} skipped`,
    r.createdAt,
  ].join('  ');
  // Blocked, failed and skipped-tick runs say why on the same line.
  return r.reason ? `${line}  (${r.reason})` : line;
}

/** Where a run's results are read from: Redis while it is there, else its archive (retention). */
async function resultsOf(
  store: RunStore,
  resultsDir: string,
  id: string,
): Promise<{ source: RunResults; archived?: string }> {
  if ((await store.getRun(id)) !== null) return { source: store };
  const archived = new ArchivedRuns(resultsDir);
  return archived.has(id) ? { source: archived, archived: archivePath(resultsDir, id) } : { source: store };
}

export function registerRunsCommand(program: Command): void {
  const runs = program
    .command('runs')
    .description('Inspect runs and their per-row results; export, retry or resume them');

  runs
    .command('list')
    .description('Runs, newest first')
    .addOption(
      new Option('--status <status>', 'only runs in this status').choices([
        'running',
        'blocked',
        'completed',
        'failed',
        'cancelled',
      ]),
    )
    .option('-w, --workspace <name>', 'only this workspace')
    .option('--sync <name>', 'only runs of this nightly sync')
    .option('--limit <n>', 'how many', positiveInt, 20)
    .option('--json', 'JSON output')
    .action(
      async (
        opts: { status?: RunStatus; workspace?: string; sync?: string; limit: number; json?: boolean },
        command: Command,
      ) => {
        await withRuntime(command, async ({ runtime: { store } }) => {
          const { runs: list, total } = await store.listRuns({
            limit: opts.limit,
            ...(opts.status ? { status: opts.status } : {}),
            ...(opts.workspace ? { workspace: opts.workspace } : {}),
            ...(opts.sync ? { syncName: opts.sync } : {}),
          });
          if (opts.json) return void process.stdout.write(`${JSON.stringify({ total, runs: list }, null, 2)}\n`);
          if (list.length === 0) return void process.stdout.write('no runs\n');
          process.stdout.write(
            `${list.map(runLine).join('\n')}\n${list.length < total ? `(${list.length} of ${total}; --limit for more)\n` : ''}`,
          );
        });
      },
    );

  runs
    .command('show')
    .argument('<id>', 'run id')
    .description('Counts and the first failed/invalid rows of a run')
    .option('--problems <n>', 'how many failed/invalid rows to list', positiveInt, 20)
    .option('--json', 'JSON output')
    .action(async (id: string, opts: { problems: number; json?: boolean }, command: Command) => {
      await withRuntime(command, async ({ runtime: { store }, config }) => {
        const { source, archived } = await resultsOf(store, config.resultsDir, id);
        const run = await source.requireRun(id);
        const problems = await source.problems(id, { limit: opts.problems });
        if (opts.json) {
          process.stdout.write(`${JSON.stringify({ run, problems, ...(archived ? { archived } : {}) }, null, 2)}\n`);
        } else {
          process.stdout.write(`${formatRunSummary(run)}\n`);
          if (archived) process.stdout.write(`  archived (no longer in Redis): ${archived}\n`);
          for (const p of problems.rows) {
            process.stdout.write(
              `  row ${p.row}${placeWords(p) ? ` (${placeWords(p)})` : ''}: ${p.status}${p.httpStatus ? ` HTTP ${p.httpStatus}` : ''}: ${p.message ?? ''}\n`,
            );
          }
          if (problems.total > problems.rows.length)
            process.stdout.write(`  … ${problems.total - problems.rows.length} more\n`);
        }
        process.exitCode = exitCodeFor(run);
      });
    });

  runs
    .command('export')
    .argument('<id>', 'run id')
    .description('Write the results as CSV (safe to open in a spreadsheet): meta columns, then the original columns')
    .option('--failed', 'only failed and invalid rows (fix them and pass the file to "runs retry --file")')
    .option('-o, --out <file>', 'output file, or - for stdout (default: <resultsDir>/<id>[-failed].csv)')
    .action(async (id: string, opts: { failed?: boolean; out?: string }, command: Command) => {
      await withRuntime(command, async ({ runtime: { store }, config }) => {
        const { source } = await resultsOf(store, config.resultsDir, id);
        await source.requireRun(id);
        if (opts.out === '-') {
          await writeResultsCsv(source, id, process.stdout, { problemsOnly: Boolean(opts.failed) });
          return;
        }
        let path = opts.out;
        if (!path) {
          mkdirSync(config.resultsDir, { recursive: true });
          path = join(config.resultsDir, `${id}${opts.failed ? '-failed' : ''}.csv`);
        }
        const out = createWriteStream(path);
        const { rows } = await writeResultsCsv(source, id, out, { problemsOnly: Boolean(opts.failed) });
        out.end();
        await finished(out);
        process.stdout.write(`${rows} rows written to ${path}\n`);
      });
    });

  runs
    .command('retry')
    .argument('<id>', 'run id')
    .description('Queue the failed and invalid rows of a run again, or the rows of a corrected export')
    .option('-f, --file <csv>', 'a corrected "runs export --failed" file: its values replace the stored ones')
    .option('--rows <list>', 'only these rows, e.g. 3,7,10-12', rowList)
    .option('--wait', 'follow the run to the end')
    .option('--work', 'also process the queue in this process (implies --wait)')
    .action(
      async (
        id: string,
        opts: { file?: string; rows?: number[]; wait?: boolean; work?: boolean },
        command: Command,
      ) => {
        await withRuntime(command, async (scope) => {
          const { runtime, logger } = scope;
          const run = await runtime.store.requireRun(id);
          await withWorkers(scope, { work: opts.work, workspace: run.workspace }, async () => {
            const summary = await retryRun({
              runId: id,
              queue: runtime.queue(run.workspace),
              store: runtime.store,
              ...(opts.file ? { file: opts.file } : {}),
              ...(opts.rows ? { rows: opts.rows } : {}),
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
            process.stdout.write(
              `${summary.progress.read} rows queued again (${summary.progress.invalid} still invalid)\n`,
            );
            if (!opts.work && !opts.wait && summary.progress.queued > 0)
              await warnIfNoWorkers(runtime.queue(run.workspace), run.workspace);
            for (const i of summary.ignored.slice(0, 20))
              process.stdout.write(`  ignored line ${i.line}${i.row ? ` (row ${i.row})` : ''}: ${i.reason}\n`);
            const presence = new QueuePresenceWatch(runtime.store, runtime.queue(run.workspace), run.workspace);
            const final = opts.wait || opts.work ? await followRun(runtime.store, id, { presence }) : summary.run;
            process.stdout.write(`${formatRunSummary(final)}\n`);
            process.exitCode = exitCodeFor(final);
          });
        });
      },
    );

  runs
    .command('prune')
    .description(
      'Retention: archive ended runs older than the cutoff (their full results to <resultsDir>/archive/<id>.ndjson.gz,\n' +
        'which "runs show" and "runs export" still read) and remove them from Redis; remove CSV files in resultsDir\n' +
        'older than the cutoff. Running and blocked runs are never touched. Workers do this on their own every 10 minutes.',
    )
    .option('--older-than <duration>', "cutoff, e.g. 30d, 12h, 90m (default: the config's retention, 30 days)")
    .option('--dry-run', 'only say what would be archived and removed')
    .action(async (opts: { olderThan?: string; dryRun?: boolean }, command: Command) => {
      await withRuntime(command, async ({ runtime: { store }, config }) => {
        const olderThanMs = opts.olderThan ? parseDuration(opts.olderThan) : config.retention.days * 86_400_000;
        const s = await pruneRuns({
          store,
          resultsDir: config.resultsDir,
          olderThanMs,
          ...(opts.dryRun ? { dryRun: true } : {}),
        });
        const verb = opts.dryRun ? 'would archive and remove' : 'archived and removed';
        process.stdout.write(
          `${verb} ${s.runs.length} runs${opts.dryRun ? '' : ` (${s.archivedRows} result rows)`}, ${s.files.length} old CSV files; ${s.kept.length} old runs still running or blocked were left alone\n`,
        );
        for (const id of s.runs.slice(0, 50)) process.stdout.write(`  ${id}\n`);
      });
    });

  runs
    .command('delete')
    .argument('<id>', 'an ended run (cancel a running one first)')
    .description("Archive the run's results to <resultsDir>/archive (unless --no-archive) and remove it from Redis")
    .option('--no-archive', 'remove without writing the archive')
    .action(async (id: string, opts: { archive: boolean }, command: Command) => {
      await withRuntime(command, async ({ runtime: { store }, config }) => {
        const run = await store.requireRun(id);
        if (run.status === 'running' || run.status === 'blocked')
          throw new CrmSyncError(
            'RUN_STATE',
            `run ${id} is ${run.status}: cancel it first (crm-sync runs cancel ${id})`,
          );
        const archived = opts.archive ? await archiveRun(store, id, config.resultsDir) : undefined;
        await store.deleteRun(id);
        process.stdout.write(
          `run ${id} removed from Redis${archived ? `; ${archived.rows} results archived to ${archived.path}` : ''}\n`,
        );
      });
    });

  runs
    .command('cancel')
    .argument('<id>', 'a running or blocked run')
    .description(
      'Stop a run: rows still waiting in the queue are removed and recorded "cancelled" (exported with\n' +
        'the failed rows; "runs retry" sends them), rows already being sent finish, and an import still\n' +
        'reading its file stops within a few seconds. The run ends "cancelled".',
    )
    .option('--reason <text>', 'said in the run and in each cancelled row', 'cancelled by an operator')
    .action(async (id: string, opts: { reason: string }, command: Command) => {
      await withRuntime(command, async ({ runtime: rt }) => {
        const { run: after, removed } = await cancelRun({
          store: rt.store,
          queueFor: (workspace) => rt.queue(workspace),
          runId: id,
          reason: opts.reason,
        });
        process.stdout.write(
          `run ${id} cancelled: ${removed} waiting rows removed and recorded cancelled; rows in flight finish\n`,
        );
        process.stdout.write(`${formatRunSummary(after)}\n`);
      });
    });

  runs
    .command('resume')
    .argument('<id>', 'a blocked run, or one whose file was not read to the end')
    .description(
      "Resume a run blocked by a refused API key (fix the key first; this lifts the workspace's block, not an\n" +
        'operator\'s pause: see "workspace resume"),\n' +
        'or go on reading the file of a run whose import stopped mid-file (killed, or Redis away too long):\n' +
        'rows already queued or recorded are passed over, the rest are queued.',
    )
    .action(async (id: string, _opts: unknown, command: Command) => {
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
          });
          process.stdout.write(
            `run ${id}: ${progress.read} more rows read, ${progress.queued} queued, ${progress.invalid} invalid; the file is read to the end\n`,
          );
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
            `the workspace stays paused by an operator (${paused.reason}): crm-sync workspace resume -w ${run.workspace}\n`,
          );
      });
    });
}

import { setTimeout as sleep } from 'node:timers/promises';
import cliProgress from 'cli-progress';
import type { RunRecord, RunStore } from '../runs/index.js';
import { EXIT, type ExitCode } from './exit-codes.js';

export interface FollowRunOptions {
  /** Draw a progress bar (TTY) instead of periodic plain lines. Default: stderr is a TTY. */
  tty?: boolean;
  /** Plain-line interval when not a TTY. Default 5000 ms. */
  lineEveryMs?: number;
  /** Print nothing while waiting. */
  quiet?: boolean;
}

const done = (r: RunRecord) => r.counts.succeeded + r.counts.failed + r.counts.skipped + r.counts.invalid;

/**
 * Waits until the run is no longer running, showing rows/s, counts and an ETA on stderr.
 * Returns the run as it ended (completed, failed or blocked).
 */
export async function followRun(store: RunStore, runId: string, options: FollowRunOptions = {}): Promise<RunRecord> {
  const tty = options.tty ?? Boolean(process.stderr.isTTY);
  const started = Date.now();
  let run = await store.requireRun(runId);
  const startDone = done(run);
  const bar =
    !options.quiet && tty
      ? new cliProgress.SingleBar(
          {
            stream: process.stderr,
            hideCursor: true,
            format: ' {bar} {percentage}% | {value}/{total} rows | {succeeded} ok, {failed} failed, {invalid} invalid | {rate} rows/s | ETA {eta_formatted}',
          },
          cliProgress.Presets.shades_classic,
        )
      : null;
  bar?.start(Math.max(run.counts.total, 1), done(run), payload(run, 0));
  let lastLine = Date.now();
  while (run.status === 'running') {
    await sleep(250);
    run = await store.requireRun(runId);
    const rate = ((done(run) - startDone) / Math.max(1, Date.now() - started)) * 1000;
    if (bar) {
      bar.setTotal(Math.max(run.counts.total, 1));
      bar.update(done(run), payload(run, rate));
    } else if (!options.quiet && Date.now() - lastLine >= (options.lineEveryMs ?? 5000)) {
      lastLine = Date.now();
      process.stderr.write(
        `run ${run.id}: ${done(run)}/${run.counts.total}${run.producerDone ? '' : '+'} rows done ` +
          `(${run.counts.succeeded} succeeded, ${run.counts.failed} failed, ${run.counts.invalid} invalid, ${run.counts.skipped} skipped), ${rate.toFixed(0)} rows/s\n`,
      );
    }
  }
  const average = ((done(run) - startDone) / Math.max(1, Date.now() - started)) * 1000;
  bar?.update(done(run), payload(run, average));
  bar?.stop();
  return run;
}

function payload(run: RunRecord, rate: number) {
  return { succeeded: run.counts.succeeded, failed: run.counts.failed, invalid: run.counts.invalid, rate: rate.toFixed(0) };
}

/** The documented exit code for a run's outcome. */
export function exitCodeFor(run: RunRecord): ExitCode {
  if (run.status === 'blocked') return EXIT.BLOCKED;
  if (run.status === 'failed' || run.counts.failed > 0 || run.counts.invalid > 0) return EXIT.ROWS_FAILED;
  return EXIT.OK;
}

/** A few plain lines a person can read at the end of a run. */
export function formatRunSummary(run: RunRecord): string {
  const c = run.counts;
  const seconds = run.finishedAt ? (Date.parse(run.finishedAt) - Date.parse(run.createdAt)) / 1000 : undefined;
  const lines = [
    `Run ${run.id}: ${run.operation} on ${run.workspace} from ${run.source}`,
    `  status: ${run.status}${seconds !== undefined ? ` in ${seconds.toFixed(1)}s` : ''}${run.reason ? ` (${run.reason})` : ''}`,
    `  rows: ${c.total} total, ${c.succeeded} succeeded, ${c.skipped} skipped, ${c.failed} failed, ${c.invalid} invalid${c.queued ? `, ${c.queued} still queued` : ''}`,
  ];
  if (c.failed + c.invalid > 0) lines.push(`  failed and invalid rows: crm-sync runs export ${run.id} --failed`);
  if (run.status === 'blocked') lines.push(`  after fixing the API key: crm-sync runs resume ${run.id}`);
  return lines.join('\n');
}

// What `crm-sync verify` does, loaded by verify-command.ts only when the command runs (its options
// and help are declared there).
import { createWriteStream } from 'node:fs';
import { finished } from 'node:stream/promises';
import type { Command } from 'commander';
import { workspaceRequestBudget } from '../rate/index.js';
import { verifyRun, type VerifyResult } from '../reconcile/index.js';
import { createCrmClient } from '../runtime/index.js';
import { withRuntime } from './context.js';

export async function verifyRunCommand(
  runId: string,
  opts: { out?: string; pageSize: number; json?: boolean },
  command: Command,
): Promise<void> {
  await withRuntime(command, async ({ runtime, config, logger }) => {
    const out = opts.out === '-' ? process.stdout : opts.out ? createWriteStream(opts.out) : undefined;
    const run = await runtime.store.requireRun(runId);
    const client = createCrmClient(config, run.workspace, logger);
    try {
      const report = await verifyRun({
        runId,
        store: runtime.store,
        client,
        budget: workspaceRequestBudget(runtime.redis, config, run.workspace, client),
        pageSize: opts.pageSize,
        ...(out ? { out } : {}),
      });
      const fields = Object.entries(report.byField)
        .map(([f, n]) => `${f} ${n}`)
        .join(', ');
      const text = opts.json
        ? JSON.stringify(report, null, 2)
        : `verify ${runId}: ${report.checked} rows checked, ${report.matching} match, ${report.drifted} drifted${fields ? ` (${fields})` : ''}, ${report.missing} missing` +
          `${report.sharedIds ? `, ${report.sharedIds} rows share a record id` : ''}` +
          `${report.suspectedDuplicates ? `, ${report.suspectedDuplicates} deals made during this run like a created one that no row of any run recorded (suspected duplicates)` : ''}` +
          `${report.recordedBeforeSend ? `, ${report.recordedBeforeSend} rows recorded a deal made before the run began (not their own)` : ''}` +
          lookAlikes(report);
      const note = report.sourceChanged
        ? `\nnote: ${run.source} changed since the run (${report.sourceChanged}): rows were checked against what they sent, and sent values of drifted fields are not shown`
        : '';
      (opts.out === '-' ? process.stderr : process.stdout).write(`${text}${opts.json ? '' : note}\n`);
      // Look-alikes made before the run, and other runs' own deals, are no fault of this run.
      const faults =
        report.drifted + report.missing + report.sharedIds + report.suspectedDuplicates + report.recordedBeforeSend;
      process.exitCode = faults > 0 ? 1 : 0;
    } finally {
      client.close();
      if (out && out !== process.stdout) {
        out.end();
        await finished(out);
      }
    }
  });
}

/** Deals like the run's that are not its doing: said, never counted as a fault. */
function lookAlikes(
  report: Pick<VerifyResult, 'preexistingLookAlikes' | 'otherRunsDeals' | 'madeAfterRun' | 'inDoubtDeals'>,
): string {
  const parts: string[] = [];
  if (report.preexistingLookAlikes)
    parts.push(`${report.preexistingLookAlikes} identical deals made before the run (not its doing)`);
  if (report.otherRunsDeals) parts.push(`${report.otherRunsDeals} identical deals recorded by other runs (theirs)`);
  if (report.madeAfterRun)
    parts.push(`${report.madeAfterRun} identical deals made after the run ended (not its doing)`);
  if (report.inDoubtDeals)
    parts.push(`${report.inDoubtDeals} deals its uncertain rows may have made ("runs retry" looks for them again)`);
  return parts.length ? `; also ${parts.join(', ')}` : '';
}

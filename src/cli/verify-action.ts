// What `crm-sync verify` does, loaded by verify-command.ts only when the command runs (its options
// and help are declared there).
import { createWriteStream } from 'node:fs';
import { finished } from 'node:stream/promises';
import type { Command } from 'commander';
import { workspaceRequestBudget } from '../queue/index.js';
import { verifyRun } from '../reconcile/index.js';
import { createCrmClient } from '../runtime/index.js';
import { withRuntime } from './context.js';

export async function verifyRunCommand(
  runId: string,
  opts: { out?: string; pageSize?: number; json?: boolean },
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
        budget: workspaceRequestBudget(runtime.redis, config, run.workspace),
        pageSize: opts.pageSize ?? 100,
        ...(out ? { out } : {}),
      });
      const fields = Object.entries(report.byField)
        .map(([f, n]) => `${f} ${n}`)
        .join(', ');
      const text = opts.json
        ? JSON.stringify(report, null, 2)
        : `verify ${runId}: ${report.checked} rows checked, ${report.matching} match, ${report.drifted} drifted${fields ? ` (${fields})` : ''}, ${report.missing} missing` +
          `${report.sharedIds ? `, ${report.sharedIds} rows share a record id` : ''}${report.suspectedDuplicates ? `, ${report.suspectedDuplicates} deals like a created one that no row recorded (suspected duplicates)` : ''}`;
      const note = report.sourceChanged
        ? `\nnote: ${run.source} changed since the run (${report.sourceChanged}): rows were checked against what they sent, and sent values of drifted fields are not shown`
        : '';
      (opts.out === '-' ? process.stderr : process.stdout).write(`${text}${opts.json ? '' : note}\n`);
      process.exitCode = report.drifted + report.missing + report.sharedIds + report.suspectedDuplicates > 0 ? 1 : 0;
    } finally {
      client.close();
      if (out && out !== process.stdout) {
        out.end();
        await finished(out);
      }
    }
  });
}

// What `crm-sync history` does, loaded by history-command.ts only when the command runs.
import type { Command } from 'commander';
import { getWorkspace } from '../config/index.js';
import { historyReport } from '../history/index.js';
import { withRuntime } from './context.js';

export async function showHistory(
  recordId: string,
  opts: { workspace: string; json?: boolean },
  command: Command,
): Promise<void> {
  await withRuntime(command, async ({ runtime, config }) => {
    getWorkspace(config, opts.workspace);
    const { entries, notes } = await historyReport({
      history: config.history,
      store: runtime.store,
      resultsDir: config.resultsDir,
      workspace: opts.workspace,
      recordId,
    });
    // On stderr, so that --json stays one array: the reader learns where the history came from.
    for (const note of notes) process.stderr.write(`note: ${note}\n`);
    if (opts.json) {
      process.stdout.write(`${JSON.stringify(entries, null, 2)}\n`);
      return;
    }
    if (entries.length === 0) {
      process.stdout.write(`no change by crm-sync to record ${recordId} in workspace "${opts.workspace}"\n`);
      return;
    }
    for (const e of entries) {
      const place = `row ${e.row}${e.line !== undefined ? ` (line ${e.line})` : ''}${e.ref !== undefined ? ` [${e.ref}]` : ''}`;
      const undo = e.undoOf !== undefined ? ` (undo of run ${e.undoOf})` : '';
      const before = e.beforeNamed ?? (e.before === null ? '(not known)' : JSON.stringify(e.before));
      const after = e.afterNamed ?? JSON.stringify(e.after);
      process.stdout.write(
        `${e.at}  run ${e.runId}${undo} ${place}: ${e.field} ${before} -> ${after}${e.from === 'archive' ? '  [archived]' : ''}\n`,
      );
    }
  });
}

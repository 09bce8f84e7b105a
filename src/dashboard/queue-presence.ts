import { pausedWords, workerCount } from '../queue/index.js';
import type { RunRecord } from '../runs/index.js';
import type { Runtime } from '../runtime/index.js';
import { html, type SafeHtml } from './html.js';

/**
 * What keeps a running run's rows waiting that the run record itself does not say: no worker
 * process serving its workspace (PoolPresence), an operator's pause, or the circuit
 * breaker holding the workspace because the CRM does not answer. Empty for a run that is not
 * running, or when nothing holds it.
 */
export async function queuePresenceNotice(
  runtime: Runtime,
  run: RunRecord,
): Promise<{ notice: SafeHtml | ''; held: boolean }> {
  if (run.status !== 'running' || run.counts.queued === 0) return { notice: '', held: false };
  const [holds, workers] = await Promise.all([
    runtime.store.holds(run.workspace),
    workerCount(runtime.redis, runtime.config.prefix, run.workspace),
  ]);
  const lines: SafeHtml[] = [];
  if (holds.unreachable)
    lines.push(
      html`<p><b>Workspace “${run.workspace}” is held: the CRM does not answer.</b> ${holds.unreachable.reason}</p>`,
    );
  if (holds.paused)
    lines.push(
      html`<p><b>Workspace “${run.workspace}” is ${pausedWords(holds.paused.reason)}</b>: rows wait until it is resumed on the <a href="/workspaces">Workspaces</a> page.</p>`,
    );
  if (workers === 0)
    lines.push(
      html`<p><b>No worker serves workspace “${run.workspace}”</b>: its rows wait until one starts. Start one with <code>crm-sync worker -w ${run.workspace}</code>.</p>`,
    );
  return {
    notice: lines.length === 0 ? '' : html`<div class="notice warn" role="status">${lines}</div>`,
    held: holds.paused !== undefined || holds.unreachable !== undefined,
  };
}

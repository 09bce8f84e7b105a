import { whyRowsWait, type WaitReason } from '../queue/index.js';
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
  const why = await whyRowsWait(runtime.store, run.workspace);
  // A blocked workspace blocks its runs: the run page says so from the run's own status.
  const lines = why.filter((w) => w.kind !== 'blocked').map((w) => words(run.workspace, w));
  return {
    notice: lines.length === 0 ? '' : html`<div class="notice warn" role="status">${lines}</div>`,
    held: why.some((w) => w.kind === 'paused' || w.kind === 'unreachable'),
  };
}

function words(ws: string, why: WaitReason): SafeHtml {
  switch (why.kind) {
    case 'unreachable':
      return html`<p><b>Workspace “${ws}” is held: the CRM does not answer.</b> ${why.reason}</p>`;
    case 'paused':
      return html`<p><b>Workspace “${ws}” is ${why.reason}</b>: rows wait until it is resumed on the <a href="/workspaces">Workspaces</a> page.</p>`;
    case 'no-worker':
      return html`<p><b>No worker serves workspace “${ws}”</b>: its rows wait until one starts. Start one with <code>crm-sync worker -w ${ws}</code>.</p>`;
    case 'blocked':
      return html`<p><b>Workspace “${ws}” is blocked:</b> ${why.reason}</p>`;
  }
}

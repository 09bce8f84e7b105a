import { verifyRun } from '../../src/reconcile/index.js';
import { silentLogger } from '../../src/log/index.js';
import { createCrmClient } from '../../src/runtime/index.js';
import type { Harness } from '../helpers/pipeline.js';

/*
 * What the create fault tests (creates.test.ts, create-doubt.test.ts) share: the fault proxy's
 * rule matcher for a deal create, the deals a test made, and verify of a run against the CRM.
 */

/** The fault proxy's rule matcher for POST v2/deals. */
export const POST_DEALS = { method: 'POST', path: /\/v2\/deals$/ };

/** Deals whose name starts with `prefix` (case folded, as the CRM compares names). */
export function dealsNamed(h: Harness, prefix: string) {
  return [...h.ws.deals.values()].filter((d) => d.name.toLowerCase().startsWith(prefix.toLowerCase()));
}

/** `crm-sync verify` of a run, through the library. */
export async function verify(h: Harness, runId: string) {
  const client = createCrmClient(h.config, 'acme', silentLogger);
  try {
    return await verifyRun({ runId, store: h.runtime.store, client });
  } finally {
    client.close();
  }
}

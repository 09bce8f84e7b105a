import type { Harness } from '../helpers/pipeline.js';
import { csv } from '../helpers/pipeline.js';
import { silentLogger } from '../../src/log/index.js';
import { createCrmClient } from '../../src/runtime/index.js';
import { reconcileImport, type ReconcileImportOptions, type ReconcileImportResult } from '../../src/reconcile/index.js';

/** Contacts as a CSV without ids (name, email, phone_number), in the simulator's current state. */
export function contactsCsv(
  h: Harness,
  change: (i: number) => boolean = () => false,
  phonePrefix = '+1 999-555-',
): { text: string; changed: number } {
  let changed = 0;
  const rows = [...h.ws.contacts.values()].map((c, i) => {
    const phone = change(i) ? `${phonePrefix}${String(i).padStart(4, '0')}` : c.phone_number;
    if (phone !== c.phone_number) changed++;
    return [c.name, c.email, phone];
  });
  return { text: csv(['name', 'email', 'phone_number'], rows), changed };
}

/** A reconciled import against the harness workspace, with its own client (closed after). */
export async function reconcile(
  h: Harness,
  file: string,
  extra: Partial<ReconcileImportOptions> & Pick<ReconcileImportOptions, 'op'>,
): Promise<ReconcileImportResult> {
  const client = createCrmClient(h.config, 'acme', silentLogger);
  try {
    return await reconcileImport({
      file,
      workspace: 'acme',
      client,
      queue: h.runtime.queue('acme'),
      store: h.runtime.store,
      ...extra,
    });
  } finally {
    client.close();
  }
}

/**
 * Write requests the CRM received, applied or not: every request that was not a list page.
 * (The simulator's `writes` counters count only applied writes; a rejected one is still sent.)
 */
export function writes(h: Harness): number {
  return h.ws.stats.requests - h.ws.stats.listPages;
}

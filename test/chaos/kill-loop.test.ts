import { describe, expect, it } from 'vitest';
import { csv } from '../helpers/pipeline.js';
import { SCALE, chaosFixture, checkChaos, duplicateDealNames, expectOwnDealsOnly, killLoop } from './chaos-check.js';

/**
 * Worker processes killed with SIGKILL every 1.5–3 s while the simulator answers 10% of
 * requests 5xx (not applied), resets 5% and applies-then-drops 10% of writes.
 */
const FAULT_MIX = { errorRate: 0.1, resetRate: 0.05, commitThenDropRate: 0.1 };

const chaos = chaosFixture();
const children = chaos.children;

describe('chaos: worker kill -9 loop under the CRM fault mix', () => {
  it(
    'updates, each deal twice: every row one result, every deal ends at its last row',
    async () => {
      const deals = 200 * SCALE;
      const h = await chaos.start({ records: deals, latencyMs: 120, retry: { attempts: 12, backoffMs: 50 } });
      const ids = [...h.ws.deals.values()].map((d) => d.id);
      // Row i and row i + deals write the same deal; the second carries the newer value.
      const rows = [...ids.map((id, i) => [id, `Old ${i}`, i]), ...ids.map((id, i) => [id, `New ${i}`, 100_000 + i])];
      const file = h.file('updates.csv', csv(['id', 'name', 'value'], rows));
      h.ws.setFaults(FAULT_MIX);
      const run = await h.importFile(file, 'deal.update');
      const kills = await killLoop(h, children, run.id, { count: 2, forMs: 10_000 * SCALE, minMs: 1500, maxMs: 3000 });
      const done = await h.waitForRun(run.id, 120_000 * SCALE);
      h.ws.setFaults(null);
      console.log(
        `[chaos] updates: ${kills} kills while the run went on; faults ${JSON.stringify({ errors5xx: h.ws.stats.errors5xx, resets: h.ws.stats.resets, drops: h.ws.stats.drops })}`,
      );
      const results = await checkChaos(h, done, {
        scenario: 'update kill loop',
        rowsIn: rows.length,
        applied: h.ws.stats.writes.dealUpdate,
      });
      expect(kills).toBeGreaterThanOrEqual(2);
      expect(h.ws.stats.drops + h.ws.stats.errors5xx).toBeGreaterThan(0); // the faults really fired
      // An older row retried after the newer one was applied is superseded, never re-applied.
      expect(results.every((r) => r.status === 'succeeded' || r.status === 'superseded')).toBe(true);
      for (const [i, id] of ids.entries())
        expect(h.ws.deals.get(id)).toMatchObject({ name: `New ${i}`, value: 100_000 + i });
    },
    240_000 * SCALE,
  );

  it(
    'creates: one deal per row, each recorded against its own row, none twice',
    async () => {
      const n = 300 * SCALE;
      const h = await chaos.start({ records: 5, latencyMs: 20, retry: { attempts: 12, backoffMs: 50 } });
      const before = h.ws.deals.size;
      const tag = `Chaos create ${Date.now().toString(36)}`;
      const file = h.file(
        'creates.csv',
        csv(
          ['name', 'value'],
          Array.from({ length: n }, (_, i) => [`${tag} ${i + 1}`, 1000 + i]),
        ),
      );
      h.ws.setFaults(FAULT_MIX);
      const run = await h.importFile(file, 'deal.create');
      const kills = await killLoop(h, children, run.id, { count: 2, forMs: 10_000 * SCALE, minMs: 1500, maxMs: 3000 });
      const done = await h.waitForRun(run.id, 120_000 * SCALE);
      h.ws.setFaults(null);
      const duplicates = duplicateDealNames(h, tag);
      console.log(
        `[chaos] creates: ${kills} kills while the run went on; POSTs applied ${h.ws.stats.writes.dealCreate}; list pages ${h.ws.stats.listPages}`,
      );
      const results = await checkChaos(h, done, {
        scenario: 'create kill loop',
        rowsIn: n,
        applied: h.ws.stats.writes.dealCreate,
        duplicates,
      });
      expect(kills).toBeGreaterThanOrEqual(2);
      // A create whose answer a kill or a drop lost, and whose own deal was stamped too close to
      // its send to tell from a person's made just before (the simulator stamps within a few ms),
      // ends uncertain naming that one deal: never recorded, never sent twice, never another's.
      const uncertain = expectOwnDealsOnly(h, results, (row) => `${tag} ${row}`);
      console.log(`[chaos] creates: ${uncertain} of ${n} rows uncertain over their own deal`);
      expect(h.ws.deals.size).toBe(before + n);
    },
    240_000 * SCALE,
  );
});

import type { ChildProcess } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { csv } from '../helpers/pipeline.js';
import { createTestSchema, TEST_DATABASE_URL, type TestSchema } from '../helpers/postgres.js';
import { SCALE, chaosFixture, checkChaos, spawnWorker } from './chaos-check.js';

/**
 * Issue 41 item 3: worker processes killed with SIGKILL while they write the PostgreSQL history
 * lose none of it. Each kill comes when the run has gone an eighth further, so the victim holds
 * changes stored in Redis but not yet written to the table (it writes them every second or 500
 * at a time). Every row's change must end in the table exactly once: the survivors catch the run
 * up from its results. HISTORY_KILL_ROWS sets the rows (default 400; the figure is 1,000).
 */
const ROWS = Number(process.env.HISTORY_KILL_ROWS ?? 400) * SCALE;
const KILLS = 6;

const chaos = chaosFixture();
const children: ChildProcess[] = chaos.children;
let schema: TestSchema;
beforeAll(async () => {
  schema = await createTestSchema('histkill');
});
afterAll(async () => {
  await schema?.drop();
});

describe('chaos: kill -9 of workers writing the PostgreSQL history', () => {
  it(
    `${ROWS} updates and ${KILLS} kills: ${ROWS} history rows, none twice`,
    async () => {
      const h = await chaos.start({ records: ROWS, latencyMs: 60 });
      const table = `${schema.name}.crm_sync_history`;
      // The worker processes read the config file: give it the history database.
      const raw = JSON.parse(readFileSync(h.configPath, 'utf8')) as Record<string, unknown>;
      writeFileSync(h.configPath, JSON.stringify({ ...raw, history: { postgresUrl: TEST_DATABASE_URL, table } }));
      const contacts = [...h.ws.contacts.values()];
      const file = h.file(
        'renames.csv',
        csv(
          ['id', 'name'],
          contacts.map((c, i) => [c.id, `Kill ${i + 1}`]),
        ),
      );
      const live = [spawnWorker(h, children), spawnWorker(h, children)];
      const run = await h.importFile(file, 'contact.update');
      let kills = 0;
      while (kills < KILLS) {
        const now = await h.runtime.store.requireRun(run.id);
        if (now.status !== 'running') break;
        if (now.counts.succeeded < ((kills + 1) * ROWS) / (KILLS + 2)) {
          await sleep(50);
          continue;
        }
        const at = kills % live.length;
        const victim = live[at]!;
        const exited = new Promise((resolve) => victim.once('exit', resolve));
        victim.kill('SIGKILL');
        await exited;
        kills++;
        live[at] = spawnWorker(h, children);
      }
      const done = await h.waitForRun(run.id, 240_000 * SCALE);
      await checkChaos(h, done, { scenario: 'history kill', rowsIn: ROWS, applied: h.ws.stats.writes.contactUpdate });
      expect(kills).toBe(KILLS);
      expect(done.counts.succeeded).toBe(ROWS);

      const count = async () =>
        (
          await schema
            .sql(`SELECT count(*)::int AS n FROM ${table} WHERE run_id = $1`, [run.id])
            .catch(() => ({ rows: [{ n: 0 }] }))
        ).rows[0] as { n: number };
      const atEnd = (await count()).n;
      const deadline = Date.now() + 120_000;
      while ((await count()).n < ROWS && Date.now() < deadline) await sleep(500);
      const { rows } = await schema.sql(
        `SELECT row_number, record_id, field, after, count(*)::int AS n FROM ${table} WHERE run_id = $1
          GROUP BY row_number, record_id, field, after ORDER BY row_number`,
        [run.id],
      );
      const written = rows as Array<{ row_number: number; record_id: string; field: string; after: string; n: number }>;
      const twice = written.filter((r) => r.n > 1).length;
      console.log(
        `[chaos] history kill: ${ROWS} rows, ${kills} kills; in the table when the run ended ${atEnd}, ` +
          `after the catch-up ${written.length} distinct (${written.reduce((s, r) => s + r.n, 0)} rows), twice ${twice}`,
      );
      expect(twice).toBe(0);
      expect(written.map((r) => [r.row_number, r.record_id, r.field, r.after])).toEqual(
        contacts.map((c, i) => [i + 1, c.id, 'name', `Kill ${i + 1}`]),
      );
    },
    400_000 * SCALE,
  );
});

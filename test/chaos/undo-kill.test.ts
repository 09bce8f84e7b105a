import { describe, expect, it } from 'vitest';
import { csv } from '../helpers/pipeline.js';
import { runCli } from '../helpers/run-cli.js';
import { SCALE, chaosFixture, checkChaos, killLoop } from './chaos-check.js';

const chaos = chaosFixture();
const children = chaos.children;

describe('chaos: an undo run while workers are killed (issue 34)', () => {
  it(
    "kill -9 of workers during undo: one result per row, every record back at its value before the run or a person's",
    async () => {
      const n = 300 * SCALE;
      const h = await chaos.start({ records: n + 50, latencyMs: 40 });
      const contacts = [...h.ws.contacts.values()].slice(0, n);
      const original = new Map(contacts.map((c) => [c.id, c.name]));
      const file = h.file(
        'renames.csv',
        csv(
          ['id', 'name'],
          contacts.map((c, i) => [c.id, `Renamed ${i}`]),
        ),
      );
      const cli = (args: string[]) => runCli(['--config', h.configPath, '--log-level', 'warn', ...args], h.env);
      const imported = await cli(['import', file, '--op', 'contact.update', '-w', 'acme', '--work', '--json']);
      expect(imported.code, imported.stderr).toBe(0);
      const { id: importId } = JSON.parse(imported.stdout) as { id: string };

      // A person edits every tenth record before the undo is planned (the plan leaves them), and
      // every tenth other one after it is planned, before it is applied (the write leaves them).
      const person = new Map<string, string>();
      const edit = (i: number) => {
        const id = contacts[i]!.id;
        h.ws.updateRecord('contacts', id, { name: `Person ${id}` });
        person.set(id, `Person ${id}`);
      };
      contacts.forEach((_, i) => i % 10 === 7 && edit(i));
      const planned = await cli(['runs', 'undo', importId, '--plan', '--json']);
      expect(planned.code, planned.stderr).toBe(0);
      const { planId } = JSON.parse(planned.stdout) as { planId: string };
      contacts.forEach((_, i) => i % 10 === 3 && edit(i));
      const leftAtWrite = contacts.filter((_, i) => i % 10 === 3).length;

      const writes = h.ws.stats.writes.contactUpdate;
      const applied = await cli(['apply', planId, '--json']);
      expect(applied.code, applied.stderr).toBe(0);
      const { id: undoId } = JSON.parse(applied.stdout) as { id: string };
      const kills = await killLoop(h, children, undoId, { count: 2, forMs: 8000 * SCALE, minMs: 800, maxMs: 1600 });
      const done = await h.waitForRun(undoId, 120_000 * SCALE);
      const results = await checkChaos(h, done, {
        scenario: `undo of a run, ${kills} kills`,
        rowsIn: n,
        applied: h.ws.stats.writes.contactUpdate - writes,
      });
      expect(done.options.undoOf).toBe(importId);
      expect(done.counts).toMatchObject({ succeeded: n - person.size, skipped: person.size, drifted: 0, failed: 0 });
      // Nothing written twice wrongly: every record holds its name before the run, or the person's.
      for (const c of contacts)
        expect(h.ws.contacts.get(c.id)!.name, c.id).toBe(person.get(c.id) ?? original.get(c.id));
      const skipped = results.filter((r) => r.status === 'skipped');
      expect(skipped.map((r) => r.recordId).sort()).toEqual([...person.keys()].sort());
      expect(skipped.filter((r) => r.message?.startsWith('not put back: name changed since the run'))).toHaveLength(
        person.size,
      );
      expect(results.filter((r) => r.message?.includes('(the run wrote "Renamed')).length).toBe(person.size);
      expect(leftAtWrite).toBeGreaterThan(0);
    },
    180_000 * SCALE,
  );
});

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { csv, resultsByRow, startHarness, type Harness } from '../helpers/pipeline.js';
import { cliFor } from '../helpers/run-cli.js';

/*
 * Issue 41 item 6, through the CLI against the simulator over HTTP and real Redis: a CRM that
 * stores values other than sent (the simulator's normalising mode: a name's whitespace
 * collapsed, an email's domain lower-cased). The row's result keeps the value the CRM answered
 * after the write, so the undo finds each record still holding what the run left and puts back
 * all 40 names and 40 emails (before: 0 and 0, every field "changed since the run"). Tag order and
 * number formats, which the canonical form already folds, are kept tested on deals.
 */

let h: Harness;
beforeAll(async () => {
  h = await startHarness({ records: 60 });
  h.ws.setNormalise(true);
  await h.startWorkers();
});
afterAll(async () => h?.close());

const cli = cliFor(() => h);

interface RunJson {
  id: string;
  counts: Record<string, number>;
}
interface UndoJson {
  restores: number;
  left: unknown[];
  run?: RunJson;
}

describe('undo against a CRM that normalises what it stores (issue 41 item 6)', () => {
  it('40 names and 40 emails stored normalised: the undo puts all 80 fields back', async () => {
    const contacts = [...h.ws.contacts.values()].slice(0, 40);
    const before = new Map(contacts.map((c) => [c.id, { name: c.name, email: c.email }]));
    const file = h.file(
      'normalised.csv',
      csv(
        ['id', 'name', 'email'],
        contacts.map((c, i) => [c.id, `Norm   Person  ${i}`, `norm.${i}@Example.COM`]),
      ),
    );
    const imported = await cli(['import', file, '--op', 'contact.update', '-w', 'acme', '--wait', '--json']);
    expect(imported.code, imported.stderr).toBe(0);
    const run = JSON.parse(imported.stdout) as RunJson;
    expect(run.counts.succeeded).toBe(40);
    // The CRM stored other text than was sent.
    contacts.forEach((c, i) =>
      expect(h.ws.contacts.get(c.id)).toMatchObject({ name: `Norm Person ${i}`, email: `norm.${i}@example.com` }),
    );
    // The result keeps the value after as the CRM answered it.
    const results = await resultsByRow(h, run.id);
    expect(results[0]!.changes).toEqual({
      name: [before.get(contacts[0]!.id)!.name, 'Norm Person 0'],
      email: [before.get(contacts[0]!.id)!.email, 'norm.0@example.com'],
    });

    const undone = await cli(['runs', 'undo', run.id, '--wait', '--json']);
    expect(undone.code, undone.stderr).toBe(0);
    const report = JSON.parse(undone.stdout) as UndoJson;
    expect(report.left).toEqual([]);
    expect(report.restores).toBe(80);
    expect(report.run!.counts).toMatchObject({ total: 40, succeeded: 40, skipped: 0, drifted: 0 });
    let names = 0;
    let emails = 0;
    for (const c of contacts) {
      const now = h.ws.contacts.get(c.id)!;
      if (now.name === before.get(c.id)!.name) names++;
      if (now.email === before.get(c.id)!.email) emails++;
    }
    expect({ names, emails }).toEqual({ names: 40, emails: 40 });
  }, 180_000);

  it('tag order and number formats: an undo of deal values and tags puts all 20 back', async () => {
    const deals = [...h.ws.deals.values()].slice(0, 20);
    const before = new Map(deals.map((d) => [d.id, { value: d.value, tags: [...d.tag_ids].sort() }]));
    const [a, b] = h.ws.tags;
    const file = h.file(
      'deals.csv',
      csv(
        ['id', 'name', 'value', 'tag_ids'],
        // Tags listed in reverse order, values with trailing zeros: the CRM answers them as a set and a number.
        deals.map((d, i) => [d.id, d.name, `${1000 + i}.50`, `${b!.id};${a!.id}`]),
      ),
    );
    const imported = await cli(['import', file, '--op', 'deal.update', '-w', 'acme', '--wait', '--json']);
    expect(imported.code, imported.stderr).toBe(0);
    expect((JSON.parse(imported.stdout) as RunJson).counts.succeeded).toBe(20);
    const run = JSON.parse(imported.stdout) as RunJson;
    const undone = await cli(['runs', 'undo', run.id, '--wait', '--json']);
    expect(undone.code, undone.stderr).toBe(0);
    const report = JSON.parse(undone.stdout) as UndoJson;
    expect(report.left).toEqual([]);
    expect(report.run!.counts).toMatchObject({ total: 20, succeeded: 20, skipped: 0, drifted: 0 });
    for (const d of deals) {
      const now = h.ws.deals.get(d.id)!;
      expect({ value: now.value, tags: [...now.tag_ids].sort() }, d.id).toEqual(before.get(d.id));
    }
  }, 180_000);
});

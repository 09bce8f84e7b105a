import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { csv, startHarness, type Harness } from '../helpers/pipeline.js';
import { cliFor } from '../helpers/run-cli.js';

/*
 * Issue 44's "Done when", through the CLI as a person runs it, against the simulator over HTTP
 * and a real Redis: 300 deals; a CSV of 200 deal updates whose Stage and Tags columns hold names
 * (10 of them the misspelling "Negotiaton") and whose Owner column holds e-mails mapped through
 * owners.csv. `plan` shows names → ids and 10 invalid rows naming "Negotiation"; after `apply`
 * the other 190 deals hold the ids their names stand for; a second plan counts 190 unchanged.
 */

let h: Harness;
beforeAll(async () => {
  h = await startHarness({ records: 300 });
});
afterAll(async () => h?.close());

const cli = cliFor(() => h);

interface PlanJson {
  planId: string;
  counts: Record<string, number>;
  names: Array<{ column: string; text: string; id: string; rows: number }>;
  unresolved: Array<{ code: string; column: string; value: string; suggestion?: string; rows: number }>;
}

describe('names instead of ids (issue 44, done when)', () => {
  it('plans names → ids, refuses the misspelt stage with its suggestion, applies the rest, and plans them unchanged again', async () => {
    const ws = h.ws;
    expect(ws.deals.size).toBe(300);
    const deals = [...ws.deals.values()].slice(0, 200);
    const stages = ws.stages;
    const tags = ws.tags;
    const owners = ws.owners;
    // What each row's names stand for, to read back from the simulator.
    const wanted = new Map<string, { stage: string; tags: string[]; owner: string }>();
    const rows = deals.map((d, i) => {
      const misspelt = i % 20 === 7;
      const stage = stages[(i * 3) % stages.length]!;
      const rowTags = [tags[i % tags.length]!, tags[(i * 7 + 3) % tags.length]!].filter(
        (t, k, all) => all.findIndex((u) => u.id === t.id) === k,
      );
      const owner = owners[i % owners.length]!;
      if (!misspelt) wanted.set(d.id, { stage: stage.id, tags: rowTags.map((t) => t.id), owner: owner.id });
      // Names as people type them: other case, stray spaces; one owner's address in capitals.
      const stageText = misspelt ? 'Negotiaton' : i % 5 === 0 ? ` ${stage.name.toUpperCase()} ` : stage.name;
      const ownerText = i % 9 === 0 ? owner.email.toUpperCase() : owner.email;
      return [d.id, stageText, rowTags.map((t) => (i % 4 === 0 ? t.name.toLowerCase() : t.name)).join('; '), ownerText];
    });
    expect(rows.filter((r) => r[1] === 'Negotiaton')).toHaveLength(10);
    const file = h.file('deals.csv', csv(['Deal ID', 'Stage', 'Tags', 'Owner'], rows));
    h.file(
      'owners.csv',
      csv(
        ['email', 'id', 'name'],
        owners.map((o) => [o.email, o.id, o.name]),
      ),
    );
    const mapping = h.file(
      'mapping.json',
      JSON.stringify({
        columns: {
          'Deal ID': 'id',
          Stage: { field: 'stage_id', by: 'name' },
          Tags: { field: 'tag_ids', by: 'name' },
          Owner: { field: 'owner_id', lookup: { file: 'owners.csv', key: 'email', value: 'id' } },
        },
      }),
    );
    const writesBefore = { ...ws.stats.writes };
    const args = ['plan', file, '--op', 'deal.update', '-w', 'acme', '--mapping', mapping];

    const shown = await cli(args);
    expect(shown.code, shown.stderr).toBe(1); // invalid rows make a plan exit 1
    expect(shown.stdout).toMatch(/update 190\b/);
    expect(shown.stdout).toMatch(/invalid 10\b/);
    expect(shown.stdout).toContain('names → ids:');
    const negotiation = stages.find((s) => s.name === 'Negotiation')!;
    expect(shown.stdout).toMatch(/Stage \(stage_id\): "[^"]+" → stg_\w+ \(\d+ rows?\)/);
    expect(shown.stdout).toMatch(/Owner \(owner_id\): "[^"]+@crm-team\.example" → usr_\w+/i);
    expect(shown.stdout).toContain('Stage (stage_id): "Negotiaton" — 10 rows, did you mean "Negotiation"?');

    const made = await cli([...args, '--json']);
    const plan = JSON.parse(made.stdout) as PlanJson;
    expect(plan.counts).toMatchObject({ update: 190, invalid: 10, skip: 0, 'not-found': 0 });
    expect(plan.unresolved).toEqual([
      expect.objectContaining({
        code: 'REFERENCE_UNKNOWN',
        column: 'Stage (stage_id)',
        value: 'Negotiaton',
        suggestion: 'Negotiation',
        rows: 10,
      }),
    ]);
    // Every name became the id it stands for; nothing of a row with the misspelt stage is planned.
    const stageName = new Map(stages.map((s) => [s.id, s.name]));
    for (const n of plan.names.filter((n) => n.column === 'Stage (stage_id)'))
      expect(n.text.trim().toLowerCase()).toBe(stageName.get(n.id)?.toLowerCase());
    expect(plan.names.some((n) => n.id === negotiation.id)).toBe(true);
    expect(ws.stats.writes).toEqual(writesBefore);

    // The plan's own pages stored the workspace's references: `refs` shows them, with when read.
    const refs = await cli(['refs', '-w', 'acme', '--json']);
    expect(refs.code, refs.stderr).toBe(0);
    const known = JSON.parse(refs.stdout) as {
      lists: Array<{ list: string; stale: boolean }>;
      pipelines: Array<{ name: string; stages: Array<{ id: string; name: string }> }>;
      tags: Array<{ id: string }>;
    };
    expect(known.lists).toEqual([expect.objectContaining({ list: 'deals', stale: false })]);
    expect(known.pipelines.find((p) => p.name === 'Sales')?.stages).toContainEqual({
      id: negotiation.id,
      name: 'Negotiation',
    });
    expect(known.tags.map((t) => t.id).sort()).toEqual(tags.map((t) => t.id).sort());
    const text = await cli(['refs', '-w', 'acme']);
    expect(text.stdout).toMatch(/deals: read \d{4}-.*\n[\s\S]*"Sales" pip_\w+\n {4}stage "Qualification" stg_\w+/);

    const listed = await cli(['plans', 'show', plan.planId, '--rows', '5']);
    expect(listed.code, listed.stderr).toBe(0);
    expect(listed.stdout).toMatch(/stage_id: "stg_\w*" -> "[^"]+" → stg_\w+/);
    expect(listed.stdout).toMatch(/owner_id: "[^"]*" -> "[^"]+@crm-team\.example" → usr_\w+/i);

    await h.startWorkers();
    const applied = await cli(['apply', plan.planId, '--wait', '--json'], { timeoutMs: 90_000 });
    expect(applied.code, applied.stderr).toBe(0);
    const run = JSON.parse(applied.stdout) as { counts: Record<string, number> };
    expect(run.counts.succeeded).toBe(190);

    // Read back from the simulator: every other deal holds its names' ids.
    let checked = 0;
    for (const [id, want] of wanted) {
      const deal = ws.deals.get(id)!;
      expect(deal.stage_id, id).toBe(want.stage);
      expect([...deal.tag_ids].sort(), id).toEqual([...want.tags].sort());
      expect(deal.owner_id, id).toBe(want.owner);
      checked++;
    }
    expect(checked).toBe(190);
    const misspelt = deals.filter((_, i) => i % 20 === 7);
    expect(ws.stats.writes.dealUpdate - writesBefore.dealUpdate).toBe(190);
    for (const d of misspelt) expect(wanted.has(d.id)).toBe(false);

    const again = await cli([...args, '--json']);
    const second = JSON.parse(again.stdout) as PlanJson;
    expect(second.counts).toMatchObject({ update: 0, skip: 190, invalid: 10 });
  }, 180_000);
});

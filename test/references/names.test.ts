import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readMappingFile } from '../../src/ingest/index.js';
import { silentLogger } from '../../src/log/index.js';
import { referenceStoreOf, workspaceReferenceLoader } from '../../src/references/index.js';
import type { RowResult } from '../../src/runs/index.js';
import { csv, startHarness, type Harness } from '../helpers/pipeline.js';
import { cliFor } from '../helpers/run-cli.js';

/*
 * Names instead of ids (issue 44) against the simulator over HTTP and a real Redis: plain imports
 * whose mapping names stages, pipelines, tags and companies and maps owners through a lookup
 * file; misspelt names; a stage name two pipelines share; a stage renamed between runs; a
 * reconciled run sent twice. The plan/apply path is names-done-when.test.ts.
 */

async function results(h: Harness, runId: string): Promise<RowResult[]> {
  const out: RowResult[] = [];
  for await (const r of h.runtime.store.iterateResults(runId)) out.push(r);
  return out;
}

function loader(h: Harness) {
  return workspaceReferenceLoader({
    config: h.config,
    workspace: 'acme',
    redis: h.runtime.redis,
    logger: silentLogger,
  });
}

describe('names in plain imports', () => {
  let h: Harness;
  beforeAll(async () => {
    // referencesMaxAgeMs 0: every run reads its list again, so a rename in the CRM is seen at once.
    h = await startHarness({ records: 600, workspace: { referencesMaxAgeMs: 0 } });
    await h.startWorkers();
  });
  afterAll(async () => h?.close());

  it('500 deal updates with Stage, Pipeline, Tags by name and Owner by e-mail: the records hold the ids; 12 misspelt stages are invalid and not sent', async () => {
    const ws = h.ws;
    const deals = [...ws.deals.values()].slice(0, 512);
    const pipelineName = new Map(ws.pipelines.map((p) => [p.id, p.name]));
    const wanted = new Map<string, { stage: string; pipeline: string; tags: string[]; owner: string }>();
    const misspelt = new Set<string>();
    const rows = deals.map((d, i) => {
      const stage = ws.stages[(i * 7) % ws.stages.length]!;
      const tag = ws.tags[i % ws.tags.length]!;
      const owner = ws.owners[i % ws.owners.length]!;
      if (i % 40 === 3 && misspelt.size < 12) {
        misspelt.add(d.id);
        return [d.id, `Deal ${i}`, pipelineName.get(stage.pipelineId)!, 'Qualifcation', tag.name, owner.email];
      }
      wanted.set(d.id, { stage: stage.id, pipeline: stage.pipelineId, tags: [tag.id], owner: owner.id });
      return [d.id, `Deal ${i}`, pipelineName.get(stage.pipelineId)!, stage.name, tag.name, owner.email];
    });
    expect(misspelt.size).toBe(12);
    const file = h.file('deals-500.csv', csv(['id', 'name', 'Pipeline', 'Stage', 'Tags', 'Owner'], rows));
    h.file('owners.json', JSON.stringify(ws.owners.map((o) => ({ email: o.email, id: o.id }))));
    const mappingPath = h.file(
      'deals-mapping.json',
      JSON.stringify({
        columns: {
          Pipeline: { field: 'pipeline_id', by: 'name' },
          Stage: { field: 'stage_id', by: 'name' },
          Tags: { field: 'tag_ids', by: 'name' },
          Owner: { field: 'owner_id', lookup: { file: 'owners.json', key: 'email', value: 'id' } },
        },
      }),
    );
    const writesBefore = ws.stats.writes.dealUpdate;
    const started = await h.importFile(file, 'deal.update', {
      mapping: readMappingFile(mappingPath),
      loadReferences: loader(h),
    });
    const run = await h.waitForRun(started.id, 60_000);
    expect(run.counts).toMatchObject({ succeeded: 500, invalid: 12, failed: 0 });
    expect(ws.stats.writes.dealUpdate - writesBefore).toBe(500);
    for (const [id, want] of wanted) {
      const deal = ws.deals.get(id)!;
      expect(deal.stage_id, id).toBe(want.stage);
      expect(deal.pipeline_id, id).toBe(want.pipeline);
      expect(deal.tag_ids, id).toEqual(want.tags);
      expect(deal.owner_id, id).toBe(want.owner);
    }
    const invalid = (await results(h, run.id)).filter((r) => r.status === 'invalid');
    expect(invalid).toHaveLength(12);
    for (const r of invalid) {
      expect(r.code).toBe('REFERENCE_UNKNOWN');
      expect(r.message).toContain('Stage (stage_id): "Qualifcation" is not a stage of pipeline "Sales"');
      expect(r.message).toContain('(did you mean "Qualification"?)');
    }
    // Nothing of theirs was sent: their deals keep their names.
    for (const id of misspelt) expect(ws.deals.get(id)!.name).not.toMatch(/^Deal \d+$/);
  }, 120_000);

  it('200 contact updates with Company by name: the records hold the company ids', async () => {
    const ws = h.ws;
    const contacts = [...ws.contacts.values()].slice(0, 200);
    const shown = new Set([...ws.contacts.values()].map((c) => c.company_id).filter((c): c is string => c !== null));
    const companies = ws.companies.filter((c) => shown.has(c.id));
    expect(companies.length).toBeGreaterThan(5);
    const wanted = new Map(contacts.map((c, i) => [c.id, companies[i % companies.length]!]));
    const file = h.file(
      'contacts.csv',
      csv(
        ['id', 'Company'],
        contacts.map((c) => [c.id, wanted.get(c.id)!.name.toUpperCase()]),
      ),
    );
    const mappingPath = h.file(
      'contacts-mapping.json',
      JSON.stringify({ columns: { Company: { field: 'company_id', by: 'name' } } }),
    );
    const started = await h.importFile(file, 'contact.update', {
      mapping: readMappingFile(mappingPath),
      loadReferences: loader(h),
    });
    const run = await h.waitForRun(started.id, 60_000);
    expect(run.counts).toMatchObject({ succeeded: 200, invalid: 0, failed: 0 });
    for (const [id, company] of wanted) expect(ws.contacts.get(id)!.company_id, id).toBe(company.id);
  }, 120_000);

  it('a stage renamed in the CRM between two runs: the next run reads the new name', async () => {
    const ws = h.ws;
    const stage = ws.stages.find((s) => s.name === 'Proposal')!;
    const deal = [...ws.deals.values()][550]!;
    const mappingPath = h.file(
      'stage-mapping.json',
      JSON.stringify({ columns: { Stage: { field: 'stage_id', by: 'name' } } }),
    );
    const mapping = readMappingFile(mappingPath);
    const importStage = async (name: string) => {
      const file = h.file(`stage-${name}.csv`, csv(['id', 'name', 'Stage'], [[deal.id, deal.name, name]]));
      const started = await h.importFile(file, 'deal.update', { mapping, loadReferences: loader(h) });
      const run = await h.waitForRun(started.id, 30_000);
      return { run, rows: await results(h, run.id) };
    };
    const first = await importStage('Proposal');
    expect(first.run.counts.succeeded).toBe(1);
    expect(ws.deals.get(deal.id)!.stage_id).toBe(stage.id);
    const store = referenceStoreOf(h.config, 'acme', h.runtime.redis);
    const before = await store.read('deals');
    expect(before?.stages.find((s) => s.id === stage.id)?.name).toBe('Proposal');

    stage.name = 'Proposal sent';
    const old = await importStage('Proposal');
    expect(old.run.counts.invalid).toBe(1);
    expect(old.rows[0]?.code).toBe('REFERENCE_UNKNOWN');
    expect(old.rows[0]?.message).toContain('(did you mean "Proposal sent"?)');
    const renamed = await importStage('proposal SENT');
    expect(renamed.run.counts.succeeded).toBe(1);
    const after = await store.read('deals');
    expect(after?.stages.find((s) => s.id === stage.id)?.name).toBe('Proposal sent');
    expect(after!.readAtMs).toBeGreaterThan(before!.readAtMs);
    stage.name = 'Proposal';
  }, 60_000);

  it('a reconciled run of the same file a second time sends nothing', async () => {
    const ws = h.ws;
    const deals = [...ws.deals.values()].slice(560, 580);
    const file = h.file(
      'reconciled.csv',
      csv(
        ['id', 'Stage', 'Tags'],
        deals.map((d, i) => [d.id, ws.stages[i % 5]!.name, `${ws.tags[i % 4]!.name}; ${ws.tags[4]!.name}`]),
      ),
    );
    const mappingPath = h.file(
      'reconciled-mapping.json',
      JSON.stringify({
        columns: { Stage: { field: 'stage_id', by: 'name' }, Tags: { field: 'tag_ids', by: 'name' } },
      }),
    );
    const cli = cliFor(() => h);
    const args = ['import', file, '--op', 'deal.update', '-w', 'acme', '--reconcile', '--mapping', mappingPath];
    const first = await cli([...args, '--wait', '--json'], { timeoutMs: 90_000 });
    expect(first.code, first.stderr).toBe(0);
    const writes = ws.stats.writes.dealUpdate;
    const second = await cli([...args, '--wait', '--json'], { timeoutMs: 90_000 });
    expect(second.code, second.stderr).toBe(0);
    const run = JSON.parse(second.stdout) as { counts: Record<string, number> };
    expect(run.counts).toMatchObject({ skipped: 20, succeeded: 0 });
    expect(ws.stats.writes.dealUpdate).toBe(writes);
  }, 120_000);
});

describe('a stage name two pipelines share', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({
      records: 60,
      simWorkspace: {
        pipelines: [
          { name: 'Sales', stages: ['Qualification', 'Review', 'Closing'] },
          { name: 'Partnerships', stages: ['Introduction', 'Review', 'Launch'] },
        ],
      },
    });
  });
  afterAll(async () => h?.close());

  it("resolves by the row's pipeline, and is ambiguous without one", async () => {
    const ws = h.ws;
    const reviews = ws.stages.filter((s) => s.name === 'Review');
    expect(reviews).toHaveLength(2);
    const [deal1, deal2, deal3] = [...ws.deals.values()];
    const file = h.file(
      'shared.csv',
      csv(
        ['id', 'name', 'Pipeline', 'Stage'],
        [
          [deal1!.id, deal1!.name, 'Partnerships', 'review'],
          [deal2!.id, deal2!.name, 'Sales', 'Review'],
          [deal3!.id, deal3!.name, '', 'Review'],
        ],
      ),
    );
    const mappingPath = h.file(
      'shared-mapping.json',
      JSON.stringify({
        columns: { Pipeline: { field: 'pipeline_id', by: 'name' }, Stage: { field: 'stage_id', by: 'name' } },
      }),
    );
    const started = await h.importFile(file, 'deal.update', {
      mapping: readMappingFile(mappingPath),
      loadReferences: loader(h),
      dryRun: true,
    });
    const run = await h.waitForRun(started.id);
    const rows = await results(h, run.id);
    expect(rows.map((r) => r.status)).toEqual(['skipped', 'skipped', 'invalid']);
    expect(rows[2]?.code).toBe('REFERENCE_AMBIGUOUS');
    for (const s of reviews) expect(rows[2]?.message).toContain(s.id);
    expect(rows[2]?.message).toContain('(pipeline "Sales")');
    expect(rows[2]?.message).toContain('(pipeline "Partnerships")');
  }, 60_000);
});

describe('lookup files', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ records: 0 });
  });
  afterAll(async () => h?.close());

  it('a lookup file with a key on two lines is refused at load, naming both lines', () => {
    h.file(
      'dup-owners.csv',
      'email,id\nmaria@acme.example,usr_1\nleo@acme.example,usr_2\n MARIA@acme.example ,usr_3\n',
    );
    const mappingPath = h.file(
      'dup-mapping.json',
      JSON.stringify({
        columns: { Owner: { field: 'owner_id', lookup: { file: 'dup-owners.csv', key: 'email', value: 'id' } } },
      }),
    );
    expect(() => readMappingFile(mappingPath)).toThrow(
      /dup-owners\.csv line 4: email "MARIA@acme\.example" is already on line 2/,
    );
  });

  it('a value map takes the mapped texts, case ignored, and refuses the others naming the allowed ones', async () => {
    const mappingPath = h.file(
      'status-mapping.json',
      JSON.stringify({
        columns: {
          Status: { field: 'status', values: { 'Closed Won': 'won', 'Closed Lost': 'lost', Open: 'in_progress' } },
        },
      }),
    );
    const file = h.file(
      'status.csv',
      csv(
        ['id', 'name', 'Status'],
        [
          ['d1', 'A', 'closed won'],
          ['d2', 'B', 'Closed Wn'],
        ],
      ),
    );
    const started = await h.importFile(file, 'deal.update', { mapping: readMappingFile(mappingPath), dryRun: true });
    const run = await h.waitForRun(started.id);
    const rows = await results(h, run.id);
    expect(rows.map((r) => r.status)).toEqual(['skipped', 'invalid']);
    expect(rows[1]?.message).toContain('"Closed Wn" is not one of the mapped values (did you mean "Closed Won"?)');
    expect(rows[1]?.message).toContain('allowed: "Closed Won", "Closed Lost", "Open"');
  });
});

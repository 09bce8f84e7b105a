import { parse } from 'csv-parse/sync';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readMappingFile } from '../../src/ingest/index.js';
import { silentLogger } from '../../src/log/index.js';
import { workspaceReferenceLoader } from '../../src/references/index.js';
import type { RowResult } from '../../src/runs/index.js';
import { csv, startHarness, type Harness } from '../helpers/pipeline.js';
import { cliFor } from '../helpers/run-cli.js';

/*
 * Names shown beside ids (issue 44, item 4) and "onUnknown": "skip-field" in results, against
 * the simulator over HTTP and a real Redis: `runs show`, `runs export`, `history`, `runs undo`
 * and `plans show|export` read `"Closing" → stg_…` as the row gave it, a rename later in the
 * CRM notwithstanding; a reconcile resolves a stage name two pipelines share by the matched
 * deal's pipeline.
 */

let h: Harness;
const cli = cliFor(() => h);

beforeAll(async () => {
  h = await startHarness({
    records: 90,
    workspace: { referencesMaxAgeMs: 0 },
    simWorkspace: {
      pipelines: [
        { name: 'Sales', stages: ['Qualification', 'Review', 'Closing'] },
        { name: 'Partnerships', stages: ['Introduction', 'Review', 'Launch'] },
        { name: 'Support', stages: ['Open', 'Solved'] },
      ],
    },
  });
  await h.startWorkers();
});
afterAll(async () => h?.close());

async function results(runId: string): Promise<RowResult[]> {
  const out: RowResult[] = [];
  for await (const r of h.runtime.store.iterateResults(runId)) out.push(r);
  return out;
}

function loader() {
  return workspaceReferenceLoader({
    config: h.config,
    workspace: 'acme',
    redis: h.runtime.redis,
    logger: silentLogger,
  });
}

const stageNamed = (pipeline: string, name: string) => {
  const p = h.ws.pipelines.find((x) => x.name === pipeline)!;
  return h.ws.stages.find((s) => s.pipelineId === p.id && s.name === name)!;
};

describe('names beside ids in results, history and undo', () => {
  it('runs show, runs export and history read "closing" → stg_…, as the row gave it, after a rename too; undo puts the id back and names it', async () => {
    const ws = h.ws;
    const closing = stageNamed('Sales', 'Closing');
    // A Sales deal not in Closing, whose stage another deal holds too (the undo's pages name it).
    const deal = [...ws.deals.values()].find(
      (d) =>
        d.pipeline_id === closing.pipelineId &&
        d.stage_id !== closing.id &&
        [...ws.deals.values()].some((o) => o.id !== d.id && o.stage_id === d.stage_id),
    )!;
    expect(deal).toBeDefined();
    const oldStage = ws.stages.find((s) => s.id === deal.stage_id)!;
    const file = h.file('shown.csv', csv(['id', 'name', 'Stage'], [[deal.id, deal.name, 'closing']]));
    const mappingPath = h.file(
      'shown-mapping.json',
      JSON.stringify({ columns: { Stage: { field: 'stage_id', by: 'name' } } }),
    );
    const started = await h.importFile(file, 'deal.update', {
      mapping: readMappingFile(mappingPath),
      loadReferences: loader(),
    });
    const run = await h.waitForRun(started.id, 60_000);
    expect(run.counts.succeeded).toBe(1);
    expect(ws.deals.get(deal.id)!.stage_id).toBe(closing.id);
    // Renamed in the CRM afterwards: the run still says what its row said.
    closing.name = 'Closing soon';
    try {
      const shown = `stage_id ${JSON.stringify(oldStage.id)} -> "closing" → ${closing.id}`;
      const show = await cli(['runs', 'show', run.id]);
      expect(show.code, show.stderr).toBe(0);
      expect(show.stdout).toContain(shown);
      const showJson = JSON.parse((await cli(['runs', 'show', run.id, '--json'])).stdout) as {
        names: Record<string, Record<string, string>>;
      };
      expect(showJson.names).toEqual({ stage_id: { [closing.id]: 'closing' } });

      const exported = await cli(['runs', 'export', run.id, '-o', '-']);
      expect(exported.code, exported.stderr).toBe(0);
      const [line] = parse(exported.stdout, { columns: true, bom: true }) as Array<Record<string, string>>;
      expect(JSON.parse(line!.crm_sync_after!)).toEqual({ stage_id: `"closing" → ${closing.id}` });
      expect(JSON.parse(line!.crm_sync_before!)).toEqual({ stage_id: oldStage.id });

      const history = await cli(['history', deal.id, '-w', 'acme']);
      expect(history.code, history.stderr).toBe(0);
      expect(history.stdout).toContain(shown);

      // Undo puts back the id, and shows the name the CRM's records give it (its own pages).
      const undo = await cli(['runs', 'undo', run.id, '--wait'], { timeoutMs: 90_000 });
      expect(undo.code, undo.stderr + undo.stdout).toBe(0);
      expect(ws.deals.get(deal.id)!.stage_id).toBe(oldStage.id);
      const undoId = (await h.runtime.store.requireRun(run.id)).undoneBy![0]!;
      const undoShow = await cli(['runs', 'show', undoId]);
      expect(undoShow.stdout).toContain(
        `stage_id ${JSON.stringify(closing.id)} -> ${JSON.stringify(oldStage.name)} → ${oldStage.id}`,
      );
      const after = await cli(['history', deal.id, '-w', 'acme']);
      expect(after.stdout).toContain(`-> ${JSON.stringify(oldStage.name)} → ${oldStage.id}`);
      expect(after.stdout).toContain(shown);
    } finally {
      closing.name = 'Closing';
    }
  }, 180_000);
});

describe('"onUnknown": "skip-field" in results', () => {
  it('an update and a create are sent without the field, and their results say which field and why', async () => {
    const ws = h.ws;
    const tag = ws.tags[0]!;
    const [deal] = [...ws.deals.values()].filter((d) => d.tag_ids.length > 0);
    const tagsBefore = [...deal!.tag_ids];
    const mappingPath = h.file(
      'skip-mapping.json',
      JSON.stringify({ columns: { Tags: { field: 'tag_ids', by: 'name', onUnknown: 'skip-field' } } }),
    );
    const mapping = readMappingFile(mappingPath);
    const why = 'sent without Tags (tag_ids): "Nosuchtag" is not a tag the CRM\'s records show';

    const update = h.file(
      'skip-update.csv',
      csv(['id', 'name', 'Tags'], [[deal!.id, 'Renamed by skip', `${tag.name}; Nosuchtag`]]),
    );
    const u = await h.waitForRun(
      (await h.importFile(update, 'deal.update', { mapping, loadReferences: loader() })).id,
      60_000,
    );
    expect(u.counts.succeeded).toBe(1);
    const [ur] = await results(u.id);
    expect(ur?.message).toContain(why);
    expect(ur?.message).toContain('("onUnknown": "skip-field")');
    expect(ws.deals.get(deal!.id)!.name).toBe('Renamed by skip');
    expect(ws.deals.get(deal!.id)!.tag_ids).toEqual(tagsBefore);
    expect(Object.keys(ur?.changes ?? {})).not.toContain('tag_ids');

    const sales = stageNamed('Sales', 'Qualification');
    const create = h.file(
      'skip-create.csv',
      csv(
        ['name', 'value', 'status', 'pipeline_id', 'stage_id', 'Tags'],
        [['Skip create deal', 100, 'in_progress', sales.pipelineId, sales.id, 'Nosuchtag']],
      ),
    );
    const dealsBefore = ws.deals.size;
    const c = await h.waitForRun(
      (await h.importFile(create, 'deal.create', { mapping, loadReferences: loader() })).id,
      60_000,
    );
    expect(c.counts.succeeded, JSON.stringify(await results(c.id))).toBe(1);
    const [cr] = await results(c.id);
    expect(cr?.message).toContain(why);
    expect(ws.deals.size).toBe(dealsBefore + 1);
    const made = ws.deals.get(cr!.recordId!)!;
    expect(made.name).toBe('Skip create deal');
    expect(made.tag_ids).toEqual([]);
    expect(Object.keys(cr?.changes ?? {})).not.toContain('tag_ids');
  }, 120_000);
});

describe('a stage name two pipelines share, in a reconcile without a pipeline column', () => {
  it("resolves by the matched deal's pipeline; ambiguous only when that pipeline holds neither", async () => {
    const ws = h.ws;
    const inPipeline = (name: string) => {
      const p = ws.pipelines.find((x) => x.name === name)!;
      // Not in Review already: a deal there would plan unchanged.
      const review = ws.stages.filter((st) => st.name === 'Review').map((st) => st.id);
      return [...ws.deals.values()].find(
        (d) => d.pipeline_id === p.id && d.name !== 'Renamed by skip' && !review.includes(d.stage_id ?? ''),
      )!;
    };
    const sales = inPipeline('Sales');
    const partners = inPipeline('Partnerships');
    const support = inPipeline('Support');
    for (const d of [sales, partners, support]) expect(d).toBeDefined();
    const file = h.file(
      'shared-reconcile.csv',
      csv(
        ['id', 'Stage'],
        [
          [sales.id, 'review'],
          [partners.id, 'Review'],
          [support.id, 'Review'],
        ],
      ),
    );
    const mappingPath = h.file(
      'shared-reconcile.json',
      JSON.stringify({ columns: { Stage: { field: 'stage_id', by: 'name' } } }),
    );
    const plan = await cli(['plan', file, '--op', 'deal.update', '-w', 'acme', '--mapping', mappingPath, '--json'], {
      timeoutMs: 60_000,
    });
    // Exit 1: a row of the plan is invalid (the ambiguous one).
    expect(plan.code, plan.stderr).toBe(1);
    const planned = JSON.parse(plan.stdout) as { planId: string; counts: Record<string, number> };
    expect(planned.counts).toMatchObject({ update: 2, invalid: 1 });
    const salesReview = stageNamed('Sales', 'Review');
    const partnersReview = stageNamed('Partnerships', 'Review');
    const show = await cli(['plans', 'show', planned.planId]);
    expect(show.stdout).toContain(`"review" → ${salesReview.id}`);
    expect(show.stdout).toContain(`"Review" → ${partnersReview.id}`);
    expect(show.stdout).toMatch(/REFERENCE_AMBIGUOUS|names 2 stages/);
    // The plan's CSV "after" column reads the same.
    const exported = await cli(['plans', 'export', planned.planId, '-o', '-']);
    const lines = parse(exported.stdout, { columns: true, bom: true }) as Array<Record<string, string>>;
    const afterOf = (id: string) => lines.find((l) => l.record_id === id && l.field === 'stage_id')?.after;
    expect(afterOf(sales.id)).toBe(`"review" → ${salesReview.id}`);
    expect(afterOf(partners.id)).toBe(`"Review" → ${partnersReview.id}`);
    const ambiguous = lines.find((l) => l.row === '3');
    expect(ambiguous?.message).toContain(salesReview.id);
    expect(ambiguous?.message).toContain(partnersReview.id);
  }, 120_000);
});

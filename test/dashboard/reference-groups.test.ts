import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readMappingFile } from '../../src/ingest/index.js';
import { silentLogger } from '../../src/log/index.js';
import { workspaceReferenceLoader } from '../../src/references/index.js';
import { csv } from '../helpers/pipeline.js';
import { startDashboardHarness, type DashboardHarness } from './dashboard-fixture.js';

/*
 * The dashboard's error groups of a run whose rows name stages nothing resolves (issue 44): one
 * group per misspelt value, with its count, the did-you-mean and REFERENCE_UNKNOWN, over the
 * dashboard's HTTP (fastify inject) against a run made through the simulator and a real Redis.
 */

let d: DashboardHarness;
beforeAll(async () => {
  d = await startDashboardHarness({ records: 40 });
});
afterAll(async () => d?.close());

/** The page's error-group rows as text: count, then the cause with its code. */
function groupsOf(body: string): Array<{ count: number; text: string }> {
  const rows = [...body.matchAll(/<tr data-group="[^"]+">([\s\S]*?)<\/tr>/g)].map((m) => m[1]!);
  return rows.map((r) => {
    const text = r
      .replace(/<[^>]+>/g, ' ')
      .replaceAll('&quot;', '"')
      .replaceAll('&#39;', "'")
      .replace(/\s+/g, ' ')
      .trim();
    return { count: Number(/^([\d,]+)/.exec(text)?.[1]?.replace(/,/g, '')), text };
  });
}

describe('error groups of names nothing resolves', () => {
  it('groups REFERENCE_UNKNOWN rows by value, each with its suggestion', async () => {
    const { h } = d;
    const deals = [...h.ws.deals.values()].slice(0, 10);
    const stage = h.ws.stages.find((s) => s.name === 'Negotiation')!;
    expect(stage).toBeDefined();
    const texts = ['Negotiaton', 'Negotiaton', 'Qualifcation', 'Negotiaton', 'Negotiation'];
    const file = h.file(
      'groups.csv',
      csv(
        ['id', 'name', 'Stage'],
        deals.map((deal, i) => [deal.id, deal.name, texts[i % texts.length]!]),
      ),
    );
    const mappingPath = h.file(
      'groups-mapping.json',
      JSON.stringify({ columns: { Stage: { field: 'stage_id', by: 'name' } } }),
    );
    const started = await h.importFile(file, 'deal.update', {
      mapping: readMappingFile(mappingPath),
      loadReferences: workspaceReferenceLoader({
        config: h.config,
        workspace: 'acme',
        redis: h.runtime.redis,
        logger: silentLogger,
      }),
      dryRun: true,
    });
    const run = await h.waitForRun(started.id);
    expect(run.counts).toMatchObject({ invalid: 8, skipped: 2 });
    const page = await d.get(`/runs/${run.id}`);
    expect(page.statusCode).toBe(200);
    const groups = groupsOf(page.body);
    expect(groups).toHaveLength(2);
    const misspelt = groups.find((g) => g.text.includes('"Negotiaton"'));
    expect(misspelt?.count).toBe(6);
    expect(misspelt?.text).toContain(`"Negotiaton" is not a stage`);
    expect(misspelt?.text).toContain('(did you mean "Negotiation"?)');
    expect(misspelt?.text).toContain('REFERENCE_UNKNOWN');
    const other = groups.find((g) => g.text.includes('"Qualifcation"'));
    expect(other?.count).toBe(2);
    expect(other?.text).toContain('(did you mean "Qualification"?)');
    expect(other?.text).toContain('REFERENCE_UNKNOWN');
  }, 60_000);
});

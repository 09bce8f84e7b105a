import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSimulator, type Simulator } from '../../src/sim/index.js';
import { client, errorOf, listPage, SpecContact, SpecDeal, SpecLead } from './sim-fixture.js';

let sim: Simulator;

beforeAll(async () => {
  sim = await startSimulator({
    workspaces: [
      { name: 'empty', apiKeys: ['e'] },
      { name: 'thirty', apiKeys: ['t'], records: 30 },
      { name: 'big', apiKeys: ['b'], records: 250 },
    ],
  });
});
afterAll(() => sim.close());

interface Page {
  pagination: { total_records: number; current_page_number: number; total_pages: number; page_size: number };
}
type AnyPage = Page & Record<string, Array<{ id: string }>>;

async function page(ws: string, key: string, path: string): Promise<AnyPage> {
  const res = await client(sim, ws, key).get(path);
  expect(res.status).toBe(200);
  return res.json as AnyPage;
}

describe('list endpoints', () => {
  it.each([
    ['deals', SpecDeal],
    ['leads', SpecLead],
    ['contacts', SpecContact],
  ] as const)('v1 and v2 %s answer the same spec-shaped page', async (resource, item) => {
    const v1 = await page('thirty', 't', `v1/${resource}?page_size=7&page_number=2`);
    const v2 = await page('thirty', 't', `v2/${resource}?page_size=7&page_number=2`);
    listPage(resource, item).parse(v2);
    expect(v1).toEqual(v2);
    expect(v2.pagination).toEqual({ total_records: 30, current_page_number: 2, total_pages: 5, page_size: 7 });
  });

  it('defaults to page 1 of 30', async () => {
    const p = await page('big', 'b', 'v2/deals');
    expect(p.deals).toHaveLength(30);
    expect(p.pagination).toEqual({ total_records: 250, current_page_number: 1, total_pages: 9, page_size: 30 });
  });

  it('0 records: an empty array and zero pages', async () => {
    const p = await page('empty', 'e', 'v2/contacts');
    expect(p.contacts).toEqual([]);
    expect(p.pagination).toEqual({ total_records: 0, current_page_number: 1, total_pages: 0, page_size: 30 });
  });

  it('exactly one full page, then an empty page past the end', async () => {
    const p1 = await page('thirty', 't', 'v2/leads?page_size=30');
    expect(p1.leads).toHaveLength(30);
    expect(p1.pagination.total_pages).toBe(1);
    const p2 = await page('thirty', 't', 'v2/leads?page_size=30&page_number=2');
    expect(p2.leads).toEqual([]);
    expect(p2.pagination).toMatchObject({ current_page_number: 2, total_pages: 1 });
    expect((await page('thirty', 't', 'v2/leads?page_number=99999')).leads).toEqual([]);
  });

  it('page_size 1 and 100: total_pages rounds up, last page is partial', async () => {
    const one = await page('big', 'b', 'v2/contacts?page_size=1&page_number=250');
    expect(one.contacts).toHaveLength(1);
    expect(one.pagination.total_pages).toBe(250);
    const hundred = await page('big', 'b', 'v2/contacts?page_size=100&page_number=3');
    expect(hundred.contacts).toHaveLength(50);
    expect(hundred.pagination.total_pages).toBe(3);
  });

  it('paging with any size returns every record once, in creation order', async () => {
    const ids: string[] = [];
    for (let n = 1; ; n++) {
      const p = await page('big', 'b', `v2/deals?page_size=37&page_number=${n}`);
      if ((p.deals ?? []).length === 0) break;
      ids.push(...(p.deals ?? []).map((d) => d.id));
    }
    expect(ids).toEqual([...sim.workspace('big').deals.keys()]);
  });

  it('records created while paging appear only on later pages', async () => {
    const ws = sim.workspace('thirty');
    const first = await page('thirty', 't', 'v2/deals?page_size=10&page_number=1');
    const created = ws.createDeal({ name: 'Late arrival' });
    const second = await page('thirty', 't', 'v2/deals?page_size=10&page_number=2');
    expect(second.deals?.[0]?.id).toBe([...ws.deals.keys()][10]);
    expect(first.deals?.map((d) => d.id)).toEqual([...ws.deals.keys()].slice(0, 10));
    const last = await page('thirty', 't', 'v2/deals?page_size=10&page_number=4');
    expect(last.deals?.map((d) => d.id)).toEqual([created.id]);
  });

  it.each([
    'page_size=0',
    'page_size=101',
    'page_size=abc',
    'page_size=1.5',
    'page_size=-1',
    'page_size=',
    'page_number=0',
    'page_number=x',
    'page_number=1&page_number=2',
  ])('422 {error} for %s', async (query) => {
    const res = await client(sim, 'big', 'b').get(`v2/deals?${query}`);
    expect(res.status).toBe(422);
    expect(errorOf(res)).toMatch(/page_(size|number)/);
  });

  it('counts list pages answered', async () => {
    const ws = sim.workspace('empty');
    ws.resetStats();
    await page('empty', 'e', 'v2/deals');
    await client(sim, 'empty', 'e').get('v2/deals?page_size=0');
    expect(ws.stats.listPages).toBe(1);
    expect(ws.stats.byStatus).toEqual({ 200: 1, 422: 1 });
  });
});

import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { parse } from 'csv-parse/sync';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Secret } from '../../src/config/index.js';
import { buildDashboard } from '../../src/dashboard/index.js';
import { sweepImportFiles } from '../../src/dashboard/import-files.js';
import { ImportStore } from '../../src/dashboard/import-store.js';
import { silentLogger } from '../../src/log/index.js';
import { PlanStore } from '../../src/plans/index.js';
import { openRuntime } from '../../src/runtime/index.js';
import { csv, startHarness, type Harness } from '../helpers/pipeline.js';
import { csrfOf, form, HOST, multipart, ORIGIN, signIn, TOKEN } from './dashboard-fixture.js';

/*
 * Issue 45's safety rules over real HTTP (inject), Redis and the simulator: form tokens on every
 * step, the -w scope, the upload limit, the file never served and removed with its plan, formulas
 * escaped in the invalid-rows CSV, nothing written before Apply, and two Applies making one run.
 */

let h: Harness;
let app: FastifyInstance;
let browser: Record<string, string>;
let imports: ImportStore;
let plans: PlanStore;
const root = () => join(h.config.resultsDir, 'dashboard-imports');

beforeAll(async () => {
  h = await startHarness({ records: 30 });
  await h.startWorkers();
  app = await buildDashboard({ runtime: h.runtime, token: new Secret(TOKEN), maxImportBytes: 64 * 1024 });
  browser = { host: HOST, cookie: await signIn(app) };
  imports = new ImportStore(h.runtime.redis, h.config.prefix);
  plans = new PlanStore({ redis: h.runtime.redis, prefix: h.config.prefix });
}, 60_000);
afterAll(async () => {
  await app?.close();
  await h?.close();
});

const get = (url: string, headers: Record<string, string> = browser) => app.inject({ method: 'GET', url, headers });
const token = async () => csrfOf((await get('/imports/new')).body);
const post = async (url: string, fields: Record<string, string> = {}, withToken = true) =>
  app.inject({
    method: 'POST',
    url,
    headers: { ...browser, origin: ORIGIN, 'content-type': 'application/x-www-form-urlencoded' },
    payload: form({ ...(withToken ? { _csrf: await token() } : {}), ...fields }),
  });

async function uploadFile(name: string, content: string, fields: Record<string, string> = {}, withToken = true) {
  const body = multipart(
    { ...(withToken ? { _csrf: await token() } : {}), workspace: 'acme', op: 'contact.update', ...fields },
    { field: 'file', name, content },
  );
  return app.inject({
    method: 'POST',
    url: '/imports',
    headers: { ...browser, origin: ORIGIN, 'content-type': body.contentType },
    payload: body.body,
  });
}

/** Posts the mapping table as the page offers it (every select's chosen option) and waits for the check. */
async function postTableAndCheck(mappingUrl: string) {
  const table = (await get(mappingUrl)).body;
  const chosen: Record<string, string> = {};
  for (const m of table.matchAll(/<select name="((?:field|type|write|by)_\d+)"[^>]*>([\s\S]*?)<\/select>/g))
    chosen[m[1]!] = /<option value="([^"]*)" selected>/.exec(m[2]!)?.[1] ?? '';
  const mapped = await post(mappingUrl, chosen);
  expect(mapped.statusCode, mapped.body).toBe(303);
  const base = mappingUrl.replace(/\/mapping$/, '');
  for (let i = 0; i < 200; i++) {
    const c = (await get(`${base}/check`, { ...browser, accept: 'application/json' })).json().check;
    if (c.state !== 'running') return c;
    await sleep(25);
  }
  throw new Error('the check did not finish');
}

/** Uploads, maps as suggested (the form's own choices) and waits for the check. */
async function uploadAndCheck(name: string, content: string): Promise<string> {
  const up = await uploadFile(name, content);
  expect(up.statusCode, up.body).toBe(303);
  const mappingUrl = String(up.headers.location);
  await postTableAndCheck(mappingUrl);
  return mappingUrl.replace(/\/mapping$/, '');
}

describe('browser imports: safety (issue 45)', () => {
  it('an upload without the form token, or from another site, is refused and leaves no file', async () => {
    const content = csv(['email', 'name'], [['a@b.example', 'A']]);
    const noToken = await uploadFile('c.csv', content, {}, false);
    expect(noToken.statusCode).toBe(403);
    const body = multipart(
      { _csrf: await token(), workspace: 'acme', op: 'contact.update' },
      { field: 'file', name: 'c.csv', content },
    );
    const crossSite = await app.inject({
      method: 'POST',
      url: '/imports',
      headers: { ...browser, origin: 'http://evil.example', 'content-type': body.contentType },
      payload: body.body,
    });
    expect(crossSite.statusCode).toBe(403);
    expect(readdirSync(root()).filter((d) => d !== '.incoming' && d !== 'acme')).toEqual([]);
    expect(existsSync(join(root(), 'acme')) ? readdirSync(join(root(), 'acme')) : []).toEqual([]);
    // Every later step is a form post with the token too.
    const base = await uploadAndCheck('token.csv', content);
    expect((await post(`${base}/plan`, {}, false)).statusCode).toBe(403);
    expect((await post(`${base}/discard`, {}, false)).statusCode).toBe(403);
    expect((await post(`${base}/mapping`, { field_0: 'email' }, false)).statusCode).toBe(403);
  });

  it('a file over the limit is pointed to the CLI; a file of another kind is refused by name', async () => {
    const big = csv(
      ['email', 'name'],
      Array.from({ length: 3000 }, (_, i) => [`p${i}@x.example`, `Person ${i}`]),
    );
    const tooBig = await uploadFile('big.csv', big);
    expect(tooBig.statusCode).toBe(413);
    expect(tooBig.body).toContain('crm-sync plan');
    const xlsx = await uploadFile('book.xlsx', 'PK…');
    expect(xlsx.statusCode).toBe(400);
    expect(xlsx.body).toContain('is not a CSV, NDJSON or JSON file');
    expect(readdirSync(join(root(), '.incoming'))).toEqual([]);
  });

  it('the file is kept where no route serves it, and goes when its plan expires', async () => {
    const contacts = [...h.ws.contacts.values()].slice(0, 3);
    const base = await uploadAndCheck(
      'kept.csv',
      csv(
        ['email', 'name'],
        contacts.map((c) => [c.email, `Kept ${c.name}`]),
      ),
    );
    const id = base.split('/')[3]!;
    const file = join(root(), 'acme', id, 'kept.csv');
    expect(existsSync(file)).toBe(true);
    for (const url of [`${base}/kept.csv`, `/imports/acme/${id}/file`, '/static/../kept.csv', `/${id}/kept.csv`])
      expect((await get(url)).statusCode, url).toBe(404);
    // Scripts asking for JSON are not told where the dashboard keeps it either.
    const json = (await get(base, { ...browser, accept: 'application/json' })).body;
    expect(json).toContain('kept.csv');
    expect(json).not.toContain(h.config.resultsDir);
    const record = (await imports.get('acme', id))!;
    // Not yet: the import's time is not over.
    // (Imports uploaded earlier in this file may expire within that second: only this one is looked at.)
    await sweepImportFiles(root(), imports, plans, record.expiresMs - 1000);
    expect(existsSync(file)).toBe(true);
    expect(await sweepImportFiles(root(), imports, plans, record.expiresMs + 1)).toBeGreaterThanOrEqual(1);
    expect(existsSync(file)).toBe(false);
    expect((await imports.get('acme', id))!.fileRemoved).toBe(true);
    expect((await get(base)).body).toContain('file removed');
    expect((await post(`${base}/plan`)).statusCode).toBe(409);
  });

  it('an NDJSON file is read as the CLI reads it: its keys are the columns, with their first values', async () => {
    const c = [...h.ws.contacts.values()][1]!;
    const up = await uploadFile(
      'rows.ndjson',
      `${JSON.stringify({ 'E-mail': c.email, Nom: 'Un' })}\n${JSON.stringify({ 'E-mail': 'x@y.example', Nom: '<i>deux</i>' })}\n`,
    );
    expect(up.statusCode, up.body).toBe(303);
    const table = (await get(String(up.headers.location))).body;
    expect(table).toContain('data-column="E-mail"');
    expect(table).toContain('data-column="Nom"');
    expect(table).toContain('&lt;i&gt;deux&lt;/i&gt;');
    expect(table).not.toContain('<i>deux</i>');
  });

  it('the mapping downloads as the file --mapping takes, and an uploaded mapping file fills the table', async () => {
    const up = await uploadFile('roundtrip.csv', csv(['E-mail', 'Mobile'], [['a@b.example', '+1 555']]));
    const mappingUrl = String(up.headers.location);
    const suggested = await get(`${mappingUrl}.json`);
    expect(suggested.headers['content-disposition']).toContain('roundtrip.mapping.json');
    expect(suggested.json()).toEqual({ columns: { 'E-mail': 'email', Mobile: null } });
    const file = JSON.stringify({
      columns: { 'E-mail': 'email', Mobile: { field: 'phone_number', write: 'if-empty' } },
    });
    const body = multipart({ _csrf: await token() }, { field: 'file', name: 'm.json', content: file });
    const filled = await app.inject({
      method: 'POST',
      url: `${mappingUrl}/file`,
      headers: { ...browser, origin: ORIGIN, 'content-type': body.contentType },
      payload: body.body,
    });
    expect(filled.statusCode, filled.body).toBe(303);
    const table = (await get(String(filled.headers.location))).body;
    expect(table).toMatch(/name="field_1"[\s\S]*?<option value="phone_number" selected>/);
    expect(table).toMatch(/name="write_1"[\s\S]*?<option value="if-empty" selected>/);
    expect((await get(`${mappingUrl}.json`)).json()).toEqual(JSON.parse(file));
    // A mapping file naming a field the operation lacks is refused with the CLI's reason.
    const wrong = multipart(
      { _csrf: await token() },
      { field: 'file', name: 'w.json', content: '{"columns":{"Mobile":"mobile"}}' },
    );
    const refused = await app.inject({
      method: 'POST',
      url: `${mappingUrl}/file`,
      headers: { ...browser, origin: ORIGIN, 'content-type': wrong.contentType },
      payload: wrong.body,
    });
    expect(refused.statusCode).toBe(422);
    expect(refused.body).toContain('which contact.update does not have');
  });

  it('a mapping file naming tags by name: every row checked with the names resolved, an unknown one invalid', async () => {
    const [c1, c2] = [...h.ws.contacts.values()].slice(20, 22);
    const tag = h.ws.tags[0]!;
    const base = (
      await uploadFile(
        'tags.csv',
        csv(
          ['email', 'Tags'],
          [
            [c1!.email, tag.name],
            [c2!.email, 'No Such Tag'],
          ],
        ),
      )
    ).headers.location!.replace(/\/mapping$/, '');
    const mapping = JSON.stringify({ columns: { email: 'email', Tags: { field: 'tag_ids', by: 'name' } } });
    const body = multipart({ _csrf: await token() }, { field: 'file', name: 'm.json', content: mapping });
    const filled = await app.inject({
      method: 'POST',
      url: `${base}/mapping/file`,
      headers: { ...browser, origin: ORIGIN, 'content-type': body.contentType },
      payload: body.body,
    });
    expect(filled.statusCode, filled.body).toBe(303);
    // The file's "by" fills the column's "holds" choice; posted as shown, the mapping keeps it.
    const table = (await get(`${base}/mapping`)).body;
    expect(table).toMatch(/name="by_1"[^>]*>[\s\S]*?<option value="name" selected>names<\/option>/);
    const check = await postTableAndCheck(`${base}/mapping`);
    expect((await get(`${base}/mapping.json`)).json().columns.Tags).toEqual({ field: 'tag_ids', by: 'name' });
    expect(check).toMatchObject({ state: 'done', valid: 1, invalid: 1 });
    expect(check.firstInvalid[0]).toMatchObject({ row: 2, column: expect.stringContaining('Tags') });
  });

  it('a Stage column of names is offered as stage_id by name; the choice goes to the JSON, the check and the next upload', async () => {
    const deals = [...h.ws.deals.values()].slice(0, 4);
    const negotiation = h.ws.stages.find((x) => x.name === 'Negotiation')!;
    const content = csv(
      ['id', 'Stage', 'Pipeline id'],
      [
        ...deals.slice(0, 3).map((d) => [d.id, 'Negotiation', negotiation.pipelineId]),
        [deals[3]!.id, 'Negotiaton', negotiation.pipelineId],
      ],
    );
    const up = await uploadFile('stages.csv', content, { op: 'deal.update' });
    expect(up.statusCode, up.body).toBe(303);
    const mappingUrl = String(up.headers.location);
    const holds = (body: string, i: number) =>
      new RegExp(`<select name="by_${i}"([^>]*)>([\\s\\S]*?)</select>`).exec(body);
    const table = (await get(mappingUrl)).body;
    // Names: offered by name, the choice labelled; ids (pip_…): ids; the id column: no choice shown.
    expect(table).toMatch(/name="field_1"[\s\S]*?<option value="stage_id" selected>/);
    expect(holds(table, 1)![1]).toContain('aria-label="What column Stage holds"');
    expect(holds(table, 1)![2]).toContain('<option value="name" selected>names</option>');
    expect(holds(table, 2)![2]).toContain('<option value="" selected>ids</option>');
    expect(holds(table, 0)![1]).toContain('hidden');
    expect((await get(`${mappingUrl}.json`)).json()).toEqual({
      columns: { id: 'id', Stage: { field: 'stage_id', by: 'name' }, 'Pipeline id': 'pipeline_id' },
    });
    // Posted as offered: the mapping says "by": "name" and every row's name is resolved.
    const check = await postTableAndCheck(mappingUrl);
    expect(check).toMatchObject({ state: 'done', valid: 3, invalid: 1 });
    expect(check.groups).toEqual([
      expect.objectContaining({
        code: 'REFERENCE_UNKNOWN',
        count: 1,
        message: expect.stringContaining('did you mean "Negotiation"'),
      }),
    ]);
    expect((await get(`${mappingUrl}.json`)).json().columns.Stage).toEqual({ field: 'stage_id', by: 'name' });
    // The same headers again: the remembered mapping keeps the choice.
    const again = String((await uploadFile('stages-2.csv', content, { op: 'deal.update' })).headers.location);
    expect(holds((await get(again)).body, 1)![2]).toContain('<option value="name" selected>names</option>');
    // Chosen "ids": the column is sent as it is, no "by".
    const asIds = await post(again, { field_0: 'id', field_1: 'stage_id', by_1: '', field_2: 'pipeline_id' });
    expect(asIds.statusCode, asIds.body).toBe(303);
    expect((await get(`${again}.json`)).json().columns.Stage).toBe('stage_id');
    // "by" on a field names do not resolve to is not offered, and not written if sent.
    const odd = await post(again, { field_0: 'id', field_1: 'name', by_1: 'name', field_2: 'pipeline_id' });
    expect(odd.statusCode, odd.body).toBe(303);
    expect((await get(`${again}.json`)).json().columns.Stage).toBe('name');
  });

  it('a mapping the CLI would refuse is refused with its reason, and the table keeps the choices', async () => {
    const up = await uploadFile('twice.csv', csv(['E-mail', 'Mail'], [['a@b.example', 'c@d.example']]));
    const mapping = String(up.headers.location);
    const refused = await post(mapping, { field_0: 'email', field_1: 'email' });
    expect(refused.statusCode).toBe(422);
    expect(refused.body).toContain('which column');
    expect(refused.body).toMatch(/name="field_1"[\s\S]*?<option value="email" selected>/);
  });

  it('the invalid-rows CSV holds every invalid row with its line and reason, formulas escaped', async () => {
    const c = [...h.ws.contacts.values()][0]!;
    const base = await uploadAndCheck(
      'formulas.csv',
      csv(
        ['email', 'name'],
        [
          [c.email, 'fine'],
          ['=cmd|"/c calc"!A1', '@SUM(1)'],
          ['', '+1'],
        ],
      ),
    );
    const check = (await get(`${base}/check`, { ...browser, accept: 'application/json' })).json().check;
    expect(check).toMatchObject({ state: 'done', valid: 1, invalid: 2 });
    const page = (await get(`${base}/check`)).body;
    expect(page).toContain('2 invalid');
    expect(page).not.toContain('calc"!A1</'); // values in causes are masked
    const answer = await get(`${base}/invalid.csv`);
    expect(answer.headers['content-type']).toContain('text/csv');
    const rows = parse(answer.body, { columns: true }) as Array<Record<string, string>>;
    expect(rows.map((r) => [r.email, r.name, r.crm_sync_line])).toEqual([
      [`'=cmd|"/c calc"!A1`, `'@SUM(1)`, '3'],
      ['', `'+1`, '4'],
    ]);
    expect(rows[1]!.crm_sync_error).toContain('email');
  });

  it('nothing is written before Apply, and two Applies of the plan make one run', async () => {
    const contacts = [...h.ws.contacts.values()].slice(5, 10);
    const base = await uploadAndCheck(
      'twice-applied.csv',
      csv(
        ['email', 'name'],
        contacts.map((c, i) => [c.email, `Twice ${i}`]),
      ),
    );
    const writes = h.ws.stats.writes.contactUpdate;
    expect((await post(`${base}/plan`)).statusCode).toBe(303);
    let planId: string | undefined;
    for (let i = 0; i < 400 && planId === undefined; i++) {
      const p = (await get(`${base}/planning`, { ...browser, accept: 'application/json' })).json().plan;
      expect(p.state).not.toBe('failed');
      planId = p.planId;
      if (planId === undefined) await sleep(25);
    }
    expect(h.ws.stats.writes.contactUpdate).toBe(writes);
    const runsBefore = (await h.runtime.store.listRuns({ workspace: 'acme', offset: 0, limit: 1 })).total;
    const answers = await Promise.all([post(`/plans/${planId}/apply`), post(`/plans/${planId}/apply`)]);
    expect(answers.map((a) => a.statusCode).sort()).toEqual([303, 409]);
    const done = answers.find((a) => a.statusCode === 303)!;
    // An import's plan goes on to its run page.
    expect(String(done.headers.location)).toMatch(/^\/runs\//);
    const plan = await plans.require(planId!);
    const run = await h.waitForRun(plan.runId!);
    expect(run.counts.succeeded).toBe(5);
    // One run: the second Apply found the plan taken (the plan store's atomic apply).
    expect((await h.runtime.store.listRuns({ workspace: 'acme', offset: 0, limit: 100 })).total).toBe(runsBefore + 1);
    // The history names who, which file and the result.
    const history = (await get('/imports')).body;
    expect(history).toMatch(/twice-applied\.csv[\s\S]*dashboard:session-[0-9a-f]{12}[\s\S]*5 succeeded/);
  });

  it('-w: a dashboard serving other workspaces neither lists, shows nor takes an import of acme', async () => {
    const [id] = (await imports.list('acme')).map((r) => r.id);
    // A second workspace in the config, served alone by a second dashboard.
    const config = { ...h.config, workspaces: { ...h.config.workspaces, globex: h.config.workspaces.acme! } };
    const runtime = await openRuntime(config, silentLogger);
    const other = await buildDashboard({ runtime, token: new Secret(TOKEN), workspaces: ['globex'] });
    try {
      const headers = { host: HOST, cookie: await signIn(other) };
      expect((await other.inject({ method: 'GET', url: `/imports/acme/${id}`, headers })).statusCode).toBe(404);
      expect((await other.inject({ method: 'GET', url: `/imports/acme/${id}/invalid.csv`, headers })).statusCode).toBe(
        404,
      );
      expect((await other.inject({ method: 'GET', url: '/imports', headers })).body).not.toContain(id);
      const newPage = (await other.inject({ method: 'GET', url: '/imports/new', headers })).body;
      expect(newPage).not.toContain('value="acme"');
      const body = multipart(
        { _csrf: csrfOf(newPage), workspace: 'acme', op: 'contact.update' },
        { field: 'file', name: 'w.csv', content: 'email\na@b.example\n' },
      );
      const refused = await other.inject({
        method: 'POST',
        url: '/imports',
        headers: { ...headers, origin: ORIGIN, 'content-type': body.contentType },
        payload: body.body,
      });
      expect(refused.statusCode).toBe(400);
      expect(refused.body).toContain('choose a workspace this dashboard serves');
    } finally {
      await other.close();
      await runtime.close();
    }
  });
});

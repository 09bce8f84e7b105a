import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'csv-parse/sync';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Secret } from '../../src/config/index.js';
import { buildDashboard } from '../../src/dashboard/index.js';
import { readRunSeries, type SeriesPoint } from '../../src/metrics/index.js';
import { csv, startHarness, type Harness } from '../helpers/pipeline.js';

/*
 * Issue 14's operator features in Debian's chromium: error groups, the run's own activity chart
 * and its durations while it is going, cancel, filters and search, Bull Board's way back, the narrow layout, and no
 * request to anywhere but the dashboard. Screenshots go to test/artifacts; docs/ gets them when
 * missing or with CRM_SYNC_UPDATE_DOCS=1.
 */

import {
  ARTIFACTS,
  capture,
  expectFitsPhone,
  hasChromium,
  launchChromium,
  PHONE,
  phoneLayout,
  signIn,
} from './browser-setup.js';

const TOKEN = 'operators-browser-token-7a1c3e5f9b2d4c6e';

let h: Harness;
let app: Awaited<ReturnType<typeof buildDashboard>>;
let browser: Browser;
let context: BrowserContext;
let page: Page;
let base: string;
/** Requests the browser made to anything but the dashboard, and CSP complaints it logged. */
const foreign: string[] = [];
const cspErrors: string[] = [];

beforeAll(async () => {
  if (!hasChromium) return;
  // The simulator allows 15 requests a second: a run of 150 rows lasts several seconds, with 429s.
  h = await startHarness({
    records: 260,
    simRateLimit: { max: 15, windowMs: 1000 },
    retry: { attempts: 1, backoffMs: 10 },
  });
  await h.startWorkers();
  app = await buildDashboard({ runtime: h.runtime, token: new Secret(TOKEN) });
  base = await app.listen({ port: 0, host: '127.0.0.1' });
  browser = await launchChromium();
  context = await browser.newContext({ acceptDownloads: true, viewport: { width: 1360, height: 900 } });
  page = await context.newPage();
  page.setDefaultTimeout(15_000);
  const origin = new URL(base).origin;
  page.on('request', (r) => {
    if (!r.url().startsWith(origin) && !r.url().startsWith('data:')) foreign.push(r.url());
  });
  page.on('console', (m) => {
    if (/Content Security Policy/i.test(m.text())) cspErrors.push(m.text());
  });
  await signIn(page, base, TOKEN);
}, 60_000);

afterAll(async () => {
  await context?.close();
  await browser?.close();
  await app?.close();
  await h?.close();
});

function screenshot(name: string): Promise<void> {
  return capture(page, name, { docs: true });
}

/** The run page's chart of the run's own series. */
const RUN_CHART = '[data-chart="run"]';

function sum(points: SeriesPoint[], value: (p: SeriesPoint) => number): number {
  return points.reduce((a, p) => a + value(p), 0);
}

/** The text of an element of the page, or null while a reload is under way. */
async function text(selector: string): Promise<string | null> {
  try {
    return (await page.locator(selector).first().textContent({ timeout: 1000 }))?.trim() ?? null;
  } catch {
    return null;
  }
}

/** An attribute of the page, or null while a reload is under way. */
async function attr(selector: string, name: string): Promise<string | null> {
  try {
    return await page.locator(selector).first().getAttribute(name, { timeout: 1000 });
  } catch {
    return null;
  }
}

describe.skipIf(!hasChromium)('operator features in a real browser', () => {
  it("draws the run's own chart from live data while it goes, with percent, rows/s, ETA and its durations", async () => {
    const stage = h.ws.stages[0]!.id;
    const deals = [...h.ws.deals.values()].slice(0, 150);
    const file = h.file(
      'live-run.csv',
      csv(
        ['id', 'name', 'stage_id'],
        deals.map((d) => [d.id, `${d.name} (live)`, stage]),
      ),
    );
    const run = await h.importFile(file, 'deal.update');
    await page.goto(`${base}/runs/${run.id}`);
    await page.locator('[data-live]', { hasText: 'rows/s' }).waitFor();
    const own = `${RUN_CHART} figure[data-series="Requests"]`;
    let first: number | null = null;
    let later: number | null = null;
    let liveSeries: SeriesPoint[] = [];
    let liveDuration: string | null = null;
    // The page reloads itself every 3 s while the run is going; each load reads the series again,
    // and dashboard.js draws it with uPlot, then marks the figure with what uPlot holds.
    for (let i = 0; i < 40 && (first === null || later === null || later <= first); i++) {
      const total = await attr(own, 'data-drawn-total');
      const running = (await attr('body', 'data-refresh')) !== '0';
      if (total !== null && running) {
        if (first === null && Number(total) > 0) {
          first = Number(total);
          // The series the page drew from, read while the run goes: points with requests in them.
          liveSeries = await readRunSeries(h.runtime.redis, h.config.prefix, run.id, Date.now());
        } else if (first !== null) later = Number(total);
        liveDuration ??= await text('[data-duration]');
      }
      await page.waitForTimeout(500);
    }
    expect(first).not.toBeNull();
    expect(later).toBeGreaterThan(first!);
    expect(liveSeries.filter((p) => p.requests > 0).length).toBeGreaterThan(0);
    expect(liveDuration).toMatch(/^\d+(\.\d)? s so far$/);
    // Drawn by uPlot: its root and canvas in each of the four boxes, no SVG left.
    expect(await page.locator(`${RUN_CHART} figure .plot .uplot canvas`).count()).toBe(4);
    expect(await page.locator(`${RUN_CHART} svg`).count()).toBe(0);
    expect(await page.locator('[data-live]').first().textContent()).toMatch(/\d+(\.\d)?%/);
    await screenshot('live-run.png');
    const done = await h.waitForRun(run.id, 60_000);
    expect(done.counts.succeeded).toBe(150);

    // Ended: the last flush lands within a second; then the page draws every nonzero bucket raised.
    let series: SeriesPoint[] = [];
    for (let i = 0; i < 30 && sum(series, (p) => p.succeeded) < 150; i++) {
      await page.waitForTimeout(200);
      series = await readRunSeries(h.runtime.redis, h.config.prefix, run.id);
    }
    expect(sum(series, (p) => p.succeeded)).toBe(150);
    // The page may be reloading itself (every 3 s while it last saw the run going) just as this
    // navigation starts: Chromium then interrupts one with the other. Either one lands on the page.
    await page.goto(`${base}/runs/${run.id}`).catch(async (err: Error) => {
      if (!/interrupted by another navigation/.test(err.message)) throw err;
      await page.goto(`${base}/runs/${run.id}`);
    });
    await page.locator(`${own}[data-drawn]`).waitFor();
    const nonzero = series.filter((p) => p.requests > 0).length;
    // What uPlot holds is the run's series: a point per bucket, the same buckets with requests, the same peak.
    expect(Number(await attr(own, 'data-drawn'))).toBe(series.length);
    expect(Number(await attr(own, 'data-drawn-nonzero'))).toBe(nonzero);
    expect(Number(await attr(own, 'data-drawn-max'))).toBeCloseTo(Math.max(...series.map((p) => p.requests)) / 10, 6);
    expect(Number(await attr(`${RUN_CHART} figure[data-series="Rows done"]`, 'data-drawn-total'))).toBe(150);
    // Times read as the headings say them: 24-hour UTC on the axis and in the readout, and no
    // "UTC: -- Requests: -" readout while the pointer is elsewhere.
    expect(await attr(own, 'data-drawn-axis')).toMatch(/^\d\d:\d\d(:\d\d)?( \d\d:\d\d(:\d\d)?)*$/);
    const legend = page.locator(`${own} .u-legend`);
    expect(await legend.isVisible()).toBe(false);
    await page.locator(`${own} .plot .u-over`).hover();
    await legend.waitFor();
    expect(await legend.textContent()).toMatch(/UTC\s*\d\d:\d\d:\d\d/);
    expect(await legend.textContent()).not.toMatch(/AM|PM|--/);
    expect(Number(await attr(`${RUN_CHART} figure[data-series="429 answers"]`, 'data-drawn-total'))).toBe(
      sum(series, (p) => p.rateLimited),
    );
    // The run's workspace, drawn too: at least this run's rows.
    const workspaceRows = Number(
      await attr('[data-chart="workspace"] figure[data-series="Rows done"]', 'data-drawn-total'),
    );
    expect(workspaceRows).toBeGreaterThanOrEqual(150);
    expect(await page.locator('[data-chart="workspace"] figure .uplot canvas').count()).toBe(4);
    // The workspaces page's chart (its last 30 minutes) is drawn the same way.
    await page.goto(`${base}/workspaces`);
    await page.locator('[data-chart="workspace"] figure[data-series="Rows done"][data-drawn]').waitFor();
    expect(
      Number(await attr('[data-chart="workspace"] figure[data-series="Rows done"]', 'data-drawn-total')),
    ).toBeGreaterThanOrEqual(150);
    await page.goto(`${base}/runs/${run.id}`);
    expect(await text('[data-duration]')).toMatch(/^took \d+(\.\d)? s$/);
    await page.goto(`${base}/?q=${run.id}`);
    expect(await text('td[data-duration]')).toMatch(/^took \d+(\.\d)? s$/);
    const limited = sum(series, (p) => p.rateLimited);
    console.log(
      `[live chart] this run's requests drawn by uPlot: ${first!.toFixed(1)} then ${later!.toFixed(1)} per s summed; ${series.length} buckets, ${nonzero} with requests; 429s: ${limited}`,
    );
  }, 90_000);

  it('groups errors by cause; a group opens, downloads and retries on its own', async () => {
    const deals = [...h.ws.deals.values()].slice(150, 184);
    const rows = deals.map((d, i) => [d.id, d.name, i < 30 ? `about ${i}k` : String(i)]);
    const file = h.file('groups.csv', csv(['id', 'name', 'value'], rows));
    // The CRM is down for this run: the 4 valid rows fail, the 30 others are invalid before sending.
    h.ws.setFaults({ errorRate: 1 });
    const run = await h.waitForRun((await h.importFile(file, 'deal.update')).id, 60_000);
    h.ws.setFaults(null);
    expect(run.counts).toMatchObject({ invalid: 30, failed: 4, succeeded: 0 });

    await page.goto(`${base}/runs/${run.id}`);
    await page.getByRole('heading', { name: 'Errors by cause' }).waitFor();
    const lines = page.locator('table.groups tbody tr');
    expect(await lines.count()).toBe(2);
    expect(await lines.nth(0).locator('td').first().textContent()).toBe('30');
    expect(await lines.nth(1).locator('td').first().textContent()).toBe('4');
    // "Retry all" names what it sends again; the group's own button says the same of its rows.
    expect(await page.locator('form:has(input[name=scope]) button').textContent()).toBe('Retry 4 failed rows');
    await page.getByText('30 invalid rows are not retried').waitFor();
    await screenshot('error-groups.png');

    const [groupFile] = await Promise.all([
      page.waitForEvent('download'),
      lines.nth(1).getByRole('link', { name: 'CSV' }).click(),
    ]);
    await groupFile.saveAs(join(ARTIFACTS, 'group.csv'));
    const records = parse(readFileSync(join(ARTIFACTS, 'group.csv')), { columns: true }) as Array<
      Record<string, string>
    >;
    expect(records.map((r) => r.crm_sync_row)).toEqual(['31', '32', '33', '34']);

    await lines.nth(1).getByRole('link', { name: 'Show rows' }).click();
    await page.getByText('One error group').waitFor();
    expect(await page.locator('tbody input[name=row]').count()).toBe(4);

    // The CRM is back: the group's retry sends exactly its rows; the invalid ones stay as they are.
    await page.goto(`${base}/runs/${run.id}`);
    await page.locator('table.groups tbody tr').nth(1).getByRole('button', { name: 'Retry 4' }).click();
    await page.getByText('4 rows sent again').waitFor();
    const after = await h.waitForRun(run.id, 30_000);
    expect(after.counts).toMatchObject({ invalid: 30, failed: 0, succeeded: 4 });
  }, 90_000);

  it('filters rows by result and finds runs by file name and id', async () => {
    await page.goto(`${base}/`);
    await page.getByLabel('Search').fill('groups.csv');
    await page.getByRole('button', { name: 'Filter' }).click();
    const found = page.locator('tbody tr td.run');
    await found.first().waitFor();
    expect(await found.count()).toBe(1);
    expect(await found.first().textContent()).toContain('groups.csv');
    // That run was retried (its failed group): active time, wall time and passes, one to a line.
    expect(await text('td[data-duration]')).toMatch(/^active [\d.]+ s\s*wall [\d.]+ s\s*2 passes \(last [\d.]+ s\)$/);
    await found.first().getByRole('link').click();
    await page.getByLabel('Result').selectOption('invalid');
    await page.getByRole('button', { name: 'Filter' }).click();
    await page.waitForURL(/result=invalid/);
    const badges = page.locator('form[action$="/retry"] tbody .badge');
    expect(await badges.count()).toBe(30);
    expect(new Set(await badges.allTextContents())).toEqual(new Set(['Invalid']));
  }, 30_000);

  it('cancels a running run from its page', async () => {
    const running = await h.runtime.store.createRun({
      workspace: 'acme',
      operation: 'deal.update',
      source: 'to-cancel.csv',
    });
    await page.goto(`${base}/runs/${running.id}`);
    await page.getByRole('button', { name: 'Cancel run' }).click();
    await page.getByText('Run cancelled').waitFor();
    expect(await page.getByRole('button', { name: 'Cancel run' }).count()).toBe(0);
    await page.getByText('cancelled from the dashboard').first().waitFor();
    expect((await h.runtime.store.requireRun(running.id)).status).toBe('cancelled');
  }, 30_000);

  it('Bull Board links back to the dashboard; nothing is loaded from elsewhere', async () => {
    await page.goto(`${base}/queues`);
    const back = page.getByRole('link', { name: /Back to the crm-sync dashboard/ });
    await back.waitFor({ timeout: 20_000 });
    await back.click();
    await page.getByRole('heading', { name: 'Runs' }).waitFor();
    expect(foreign).toEqual([]);
    expect(cspErrors).toEqual([]);
  }, 45_000);

  it("fits a phone: no page scrolls sideways, each page's main action is on screen, Retry comes before the charts", async () => {
    const stage = h.ws.stages[0]!.id;
    // A run whose valid rows fail while the CRM is down (a retry may pass), and one whose rows
    // name records the CRM does not have (404: sent again as they are, they fail again).
    const down = [...h.ws.deals.values()].slice(184, 186);
    h.ws.setFaults({ errorRate: 1 });
    const flaky = await h.waitForRun(
      (
        await h.importFile(
          h.file(
            'phone-down.csv',
            csv(
              ['id', 'name'],
              down.map((d) => [d.id, `${d.name} (down)`]),
            ),
          ),
          'deal.update',
        )
      ).id,
      30_000,
    );
    h.ws.setFaults(null);
    expect(flaky.counts).toMatchObject({ failed: 2 });
    const written = [...h.ws.deals.values()].slice(186, 188);
    const gone = await h.waitForRun(
      (
        await h.importFile(
          h.file(
            'phone-gone.csv',
            csv(
              ['id', 'name', 'stage_id'],
              [
                ...written.map((d) => [d.id, `${d.name} — renamed on a phone, with a long name to show`, stage]),
                ['deal_gone_1', 'Ghost 1', stage],
                ['deal_gone_2', 'Ghost 2', stage],
              ],
            ),
          ),
          'deal.update',
        )
      ).id,
      30_000,
    );
    expect(gone.counts).toMatchObject({ succeeded: 2, failed: 2 });

    const phone = await context.newPage();
    const signedOut = await browser.newContext({ viewport: PHONE });
    try {
      await phone.setViewportSize(PHONE);
      phone.setDefaultTimeout(15_000);
      await phone.goto(`${base}/`);
      await expectFitsPhone(phone, 'runs list', 'tbody td.run a');
      await expectFitsPhone(phone, 'runs list', 'form.filters button');
      await capture(phone, 'narrow-runs.png', { docs: true });

      await phone.goto(`${base}/workspaces`);
      await expectFitsPhone(phone, 'workspaces', 'tbody button');

      // The run page: its Retry before the first chart, a group's Retry on screen.
      await phone.goto(`${base}/runs/${flaky.id}`);
      const retry = 'form:has(input[name=scope]) button';
      await expectFitsPhone(phone, 'run page', retry);
      await expectFitsPhone(phone, 'run page, its error group', 'table.groups tr[data-group] button');
      const [button, chart] = (await phoneLayout(phone, [retry, '[data-chart]'])).boxes;
      expect(chart, 'the run page has its charts').not.toBeNull();
      expect.soft(button!.bottom, 'Retry ends before the first chart starts').toBeLessThanOrEqual(chart!.top);
      await capture(phone, 'narrow-run.png');

      // 404s: no Retry for the group, what to do instead; the run's other actions are still there.
      await phone.goto(`${base}/runs/${gone.id}`);
      await expectFitsPhone(phone, 'run page with 404s', 'form[action$="/undo"] button');
      const group = phone.locator('table.groups tr[data-group]');
      expect(await group.count()).toBe(1);
      expect(await group.locator('td.err').textContent()).toContain('CRM_NOT_FOUND');
      expect.soft(await group.getByRole('button').count(), 'no Retry for a 404 group').toBe(0);
      expect
        .soft(
          await group
            .locator('[data-permanent]')
            .textContent({ timeout: 1000 })
            .catch(() => null),
        )
        .toMatch(/Fix the id in the file/);

      // A record's history: wide before → after lines scroll in their box, not the page.
      await phone.goto(`${base}/records/acme/${written[0]!.id}`);
      await phone.getByRole('heading', { name: /^Record/ }).waitFor();
      expect(await phone.locator('table.history tbody tr').count()).toBeGreaterThan(0);
      await expectFitsPhone(phone, 'record history', 'table.history tbody a');
      await capture(phone, 'narrow-record.png');

      const login = await signedOut.newPage();
      await login.goto(`${base}/login`);
      await expectFitsPhone(login, 'login', 'button[type=submit]');
    } finally {
      await phone.close();
      await signedOut.close();
    }
  }, 60_000);
});

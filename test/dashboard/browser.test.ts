import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'csv-parse/sync';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Secret } from '../../src/config/index.js';
import { buildDashboard } from '../../src/dashboard/index.js';
import { csv, startHarness, type Harness } from '../helpers/pipeline.js';

import { ARTIFACTS, capture, hasChromium, launchChromium, signedInPage } from './browser-setup.js';

const TOKEN = 'browser-test-token-5f2c9a0b1c2d3e4f5a6b';

let h: Harness;
let app: Awaited<ReturnType<typeof buildDashboard>>;
let browser: Browser;
let base: string;

beforeAll(async () => {
  if (!hasChromium) return;
  h = await startHarness({ records: 40, retry: { attempts: 2, backoffMs: 20 } });
  await h.startWorkers();
  app = await buildDashboard({ runtime: h.runtime, token: new Secret(TOKEN) });
  base = await app.listen({ port: 0, host: '127.0.0.1' });
  browser = await launchChromium();
});

afterAll(async () => {
  await browser?.close();
  await app?.close();
  await h?.close();
});

async function download(page: Page, linkText: string, name: string): Promise<Array<Record<string, string>>> {
  const [file] = await Promise.all([page.waitForEvent('download'), page.getByRole('link', { name: linkText }).click()]);
  const path = join(ARTIFACTS, name);
  await file.saveAs(path);
  return parse(readFileSync(path), { columns: true }) as Array<Record<string, string>>;
}

describe.skipIf(!hasChromium)('dashboard in a real browser', () => {
  it('signs in, shows failed rows, fixes them from an uploaded CSV, ends with zero failures', async () => {
    const stage = h.ws.stages[0]!.id;
    const earlier = [...h.ws.deals.values()].slice(20, 26);
    const clean = h.file(
      'deals-owners.csv',
      csv(
        ['id', 'name'],
        earlier.map((d) => [d.id, d.name]),
      ),
    );
    await h.waitForRun((await h.importFile(clean, 'deal.update')).id);
    const deals = [...h.ws.deals.values()].slice(0, 12);
    const rows = deals.map((d, i) => [d.id, `Q${(i % 4) + 1} renewal — ${d.name}`, String(1000 + i * 250), stage]);
    for (const i of [2, 5, 9]) rows[i]![3] = `stg_unknown_${i}`; // the CRM answers 422
    rows[7]![2] = 'twelve hundred'; // not a number: invalid before sending
    const file = h.file('deals-update.csv', csv(['id', 'name', 'value', 'stage_id'], rows));
    const run = await h.waitForRun((await h.importFile(file, 'deal.update')).id);
    expect(run.counts).toMatchObject({ succeeded: 8, failed: 3, invalid: 1 });

    const context = await browser.newContext({ acceptDownloads: true, viewport: { width: 1360, height: 860 } });
    const page = await context.newPage();
    page.setDefaultTimeout(15_000);
    await page.goto(`${base}/`);
    expect(new URL(page.url()).pathname).toBe('/login');
    await page.getByLabel('Token').fill('wrong token');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByText('That token is not right').waitFor();
    await page.getByLabel('Token').fill(TOKEN);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'Runs' }).waitFor();
    await page.getByText('3 failed rows, 1 invalid row').first().waitFor();
    await capture(page, 'runs-page.png');

    await page.locator(`a[href="/runs/${run.id}"]`).click();
    await page.getByRole('heading', { name: 'Failed and invalid rows' }).waitFor();
    expect(await page.locator('tbody input[name=row]').count()).toBe(4);
    // docs/dashboard.md's screenshot: refreshed on demand only, so a test run does not dirty the tree.
    await capture(page, 'run-page.png', { docs: true });

    const failed = await download(page, 'Download failed rows (CSV)', 'failed-before.csv');
    expect(failed.map((r) => [r.crm_sync_row, r.crm_sync_result])).toEqual([
      ['3', 'failed'],
      ['6', 'failed'],
      ['8', 'invalid'],
      ['10', 'failed'],
    ]);
    // The operator fixes the stage and the value in a spreadsheet and saves the file.
    const header = Object.keys(failed[0]!);
    const fixed = failed.map((r) =>
      header.map((k) => (k === 'stage_id' ? stage : k === 'value' && r.crm_sync_result === 'invalid' ? '1200' : r[k]!)),
    );
    const fixedPath = join(ARTIFACTS, 'failed-fixed.csv');
    writeFileSync(fixedPath, csv(header, fixed));

    await page.getByLabel('Corrected CSV').setInputFiles(fixedPath);
    await page.getByRole('button', { name: 'Upload and retry' }).click();
    await page.getByText('4 rows sent again. Every line of the file was used.').waitFor();
    await page.getByRole('link', { name: 'Open the run to follow the retry' }).click();
    // The page reloads itself while the run is running.
    await page.locator('.badge', { hasText: /^Completed$/ }).waitFor({ timeout: 20_000 });
    await page.getByText('No failed or invalid rows.').waitFor();
    expect(await page.locator('.counts .ok b').textContent()).toBe('12');

    const after = await download(page, 'Download failed rows (CSV)', 'failed-after.csv');
    expect(after).toEqual([]);
    const header2 = readFileSync(join(ARTIFACTS, 'failed-after.csv'), 'utf8').split('\n')[0];
    expect(header2).toBe(
      'crm_sync_run_id,crm_sync_row,crm_sync_line,crm_sync_result,crm_sync_record_id,crm_sync_http_status,crm_sync_error,crm_sync_before,crm_sync_after,id,name,value,stage_id',
    );
    const all = await download(page, 'Download all results (CSV)', 'results-after.csv');
    expect(all.map((r) => r.crm_sync_result)).toEqual(Array(12).fill('succeeded'));
    expect(h.ws.deals.get(deals[2]!.id)?.stage_id).toBe(stage);
    expect(h.ws.deals.get(deals[7]!.id)?.value).toBe(1200);
    await context.close();
  }, 60_000);

  it('the runs list fits a 1,280-px screen: Started and Duration are on screen, unclipped', async () => {
    // A run with a long file name beside the runs of the test above.
    const deals = [...h.ws.deals.values()].slice(30, 36);
    const same = h.file(
      'a-rather-long-file-name-for-the-nightly-export-of-deals-2026-11.csv',
      csv(
        ['id', 'name'],
        deals.map((d) => [d.id, d.name]),
      ),
    );
    await h.waitForRun((await h.importFile(same, 'deal.update')).id);
    const { context, page } = await signedInPage(browser, base, TOKEN, { timeoutMs: 15_000 });
    interface Layout {
      page: number;
      scroll: number;
      head: Array<{ text: string; right: number }>;
      started: Array<{ clipped: boolean }>;
    }
    // A string: the test is type-checked without the DOM library; the browser evaluates it.
    const box = (await page.evaluate(`(() => {
      const scroll = document.querySelector('.scroll');
      const head = [...document.querySelectorAll('thead th')].map((th) => ({
        text: th.textContent,
        right: th.getBoundingClientRect().right,
      }));
      const started = [...document.querySelectorAll('td.started')].map((td) => ({ clipped: td.scrollWidth > td.clientWidth }));
      return { page: document.documentElement.scrollWidth, scroll: scroll.scrollWidth - scroll.clientWidth, head, started };
    })()`)) as Layout;
    await capture(page, 'runs-page-1280.png');
    expect(box.page).toBeLessThanOrEqual(1280);
    expect(box.scroll).toBe(0);
    for (const th of box.head) expect(th.right, th.text).toBeLessThanOrEqual(1280);
    expect(box.head.map((th) => th.text)).toEqual(expect.arrayContaining(['Started', 'Duration']));
    expect(box.started.length).toBeGreaterThan(0);
    for (const td of box.started) expect(td.clipped).toBe(false);
    await context.close();
  }, 60_000);
});

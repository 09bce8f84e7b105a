import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Secret } from '../../src/config/index.js';
import { buildDashboard } from '../../src/dashboard/index.js';
import { csv, startHarness, type Harness } from '../helpers/pipeline.js';
import { capture, expectFitsPhone, hasChromium, launchChromium, PHONE, signedInPage } from './browser-setup.js';

/*
 * The mapping table's "holds: ids | names" (issue 45, names instead of ids of issue 44) in
 * Debian's chromium: a deals CSV whose Stage column holds stage names is offered as stage_id by
 * name, the check names the misspelt rows with the did-you-mean the CLI gives, and the plan,
 * applied, leaves the other deals in the stages their names stand for.
 */

const TOKEN = 'import-by-name-token-5e2a9c1f7b3d8e4a6c0f';

let h: Harness;
let app: Awaited<ReturnType<typeof buildDashboard>>;
let browser: Browser;
let context: BrowserContext;
let page: Page;
let base: string;

beforeAll(async () => {
  if (!hasChromium) return;
  h = await startHarness({ records: 60 });
  await h.startWorkers();
  app = await buildDashboard({ runtime: h.runtime, token: new Secret(TOKEN) });
  base = await app.listen({ port: 0, host: '127.0.0.1' });
  browser = await launchChromium();
  ({ context, page } = await signedInPage(browser, base, TOKEN));
}, 60_000);

afterAll(async () => {
  await context?.close();
  await browser?.close();
  await app?.close();
  await h?.close();
});

describe.skipIf(!hasChromium)('importing stage names from the browser', () => {
  it('a Stage column of names: offered by name, misspelt rows shown with did-you-mean, the rest applied as stage ids', async () => {
    const sales = h.ws.pipelines.find((p) => p.name === 'Sales')!;
    const stageOf = (name: string) => h.ws.stages.find((s) => s.pipelineId === sales.id && s.name === name)!;
    const names = ['Negotiation', 'Proposal', 'Qualification'];
    // The workspace's deals show these stages (the references are what records carry).
    const deals = [...h.ws.deals.values()];
    for (const name of names)
      expect(
        deals.some((d) => d.stage_id === stageOf(name).id),
        name,
      ).toBe(true);
    // Sales deals, each to a stage it is not in yet; rows 5, 8 and 11 misspelt.
    const picked = deals.filter((d) => d.pipeline_id === sales.id).slice(0, 12);
    expect(picked).toHaveLength(12);
    const misspelt = new Set([4, 7, 10]);
    const rows = picked.map((d, i) => {
      const target = [0, 1, 2].map((k) => names[(i + k) % 3]!).find((n) => stageOf(n).id !== d.stage_id)!;
      return { id: d.id, before: d.stage_id, name: misspelt.has(i) ? 'Negotiaton' : target };
    });
    const file = h.file(
      'deal-stages.csv',
      csv(
        ['id', 'Stage'],
        rows.map((r) => [r.id, r.name]),
      ),
    );

    await page.goto(`${base}/imports/new`);
    await page.locator('select[name=op]').selectOption('deal.update');
    await page.getByLabel(/^File/).setInputFiles(file);
    await page.getByRole('button', { name: 'Upload and map columns' }).click();
    await page.getByRole('heading', { name: /Map columns/ }).waitFor();
    expect(await page.getByLabel('Field for column Stage', { exact: true }).inputValue()).toBe('stage_id');
    const holds = page.getByLabel('What column Stage holds', { exact: true });
    expect(await holds.inputValue()).toBe('name');
    // The id column has no such choice; a field changed to a reference shows it, and away hides it.
    expect(await page.getByLabel('What column id holds', { exact: true }).isHidden()).toBe(true);
    await page.getByLabel('Field for column Stage', { exact: true }).selectOption('name');
    expect(await holds.isHidden()).toBe(true);
    await page.getByLabel('Field for column Stage', { exact: true }).selectOption('stage_id');
    expect(await holds.isVisible()).toBe(true);

    // On a phone the choice is on screen, labelled as the other choices are.
    const narrow = await context.newPage();
    try {
      await narrow.setViewportSize(PHONE);
      await narrow.goto(page.url());
      await expectFitsPhone(narrow, 'mapping with holds', 'tr[data-column="Stage"] select[name^=by_]');
      expect(await narrow.locator('tr[data-column="id"] td.holds').isHidden()).toBe(true);
      await capture(narrow, 'narrow-import-by-name.png');
    } finally {
      await narrow.close();
    }

    await page.getByRole('button', { name: 'Check every row' }).click();
    await page.getByText('9 valid', { exact: true }).waitFor();
    expect(await page.getByText('3 invalid', { exact: true }).count()).toBe(1);
    const group = page.locator('tr[data-group]');
    expect(await group.count()).toBe(1);
    expect(await group.locator('td.num').textContent()).toBe('3');
    expect(await group.textContent()).toContain('did you mean "Negotiation"');
    expect(await group.textContent()).toContain('REFERENCE_UNKNOWN');
    await capture(page, 'import-by-name-check.png');

    await page.getByRole('button', { name: 'Make the plan' }).click();
    await page.getByRole('heading', { name: /^Plan · deal-stages\.csv/ }).waitFor();
    await page.getByRole('button', { name: /^Apply plan/ }).click();
    await page.waitForURL(/\/runs\/[^/?]+$/);
    const run = await h.waitForRun(decodeURIComponent(new URL(page.url()).pathname.split('/')[2]!), 30_000);
    expect(run.counts).toMatchObject({ succeeded: 9, failed: 0 });
    expect(rows.map((r) => h.ws.deals.get(r.id)!.stage_id)).toEqual(
      rows.map((r, i) => (misspelt.has(i) ? r.before : stageOf(r.name).id)),
    );
  }, 15_000);
});

import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Secret } from '../../src/config/index.js';
import { buildDashboard } from '../../src/dashboard/index.js';
import { silentLogger } from '../../src/log/index.js';
import { makePlan, PlanStore, type PlanRecord } from '../../src/plans/index.js';
import { createCrmClient } from '../../src/runtime/index.js';
import { csv, startHarness, type Harness } from '../helpers/pipeline.js';
import { capture, expectFitsPhone, hasChromium, launchChromium, PHONE, signedInPage } from './browser-setup.js';

/*
 * Issue 33's plan page in Debian's chromium: open a plan from the Plans list, filter its rows by
 * field, approve it with the page's button, see its status change there and on the list; both
 * pages fit a phone's width. No workers: approving sends nothing.
 */

const TOKEN = 'plans-browser-token-5d2b9e7c1a4f6e8b3c0d';

let h: Harness;
let app: Awaited<ReturnType<typeof buildDashboard>>;
let browser: Browser;
let context: BrowserContext;
let page: Page;
let base: string;
let plan: PlanRecord;
let plans: PlanStore;

beforeAll(async () => {
  if (!hasChromium) return;
  h = await startHarness({ records: 12 });
  const contacts = [...h.ws.contacts.values()].slice(0, 10);
  // Every row renames; the first four change the e-mail too: two fields to filter by.
  const file = h.file(
    'browser-renames.csv',
    csv(
      ['id', 'name', 'email'],
      contacts.map((c, i) => [c.id, `Browser ${i}`, i < 4 ? `browser${i}@example.com` : c.email]),
    ),
  );
  plans = new PlanStore({ redis: h.runtime.redis, prefix: h.config.prefix });
  const client = createCrmClient(h.config, 'acme', silentLogger);
  try {
    ({ plan } = await makePlan({
      store: plans,
      file,
      op: 'contact.update',
      workspace: 'acme',
      client,
      settings: { planTtlMs: 60_000, driftMaxAgeMs: 10_000 },
    }));
  } finally {
    client.close();
  }
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

describe.skipIf(!hasChromium)('the plan page in a real browser', () => {
  it('opens a plan from the list, filters by field, approves it, and both pages show the new status', async () => {
    await page.getByRole('navigation').getByRole('link', { name: 'Plans' }).click();
    await page.getByRole('heading', { name: 'Plans' }).waitFor();
    const line = page.locator(`tr[data-plan="${plan.id}"]`);
    expect(await line.locator('[data-status]').getAttribute('data-status')).toBe('pending');
    await line.getByRole('link', { name: 'browser-renames.csv' }).click();
    await page.getByRole('heading', { name: /browser-renames\.csv/ }).waitFor();

    // Ten renames and four e-mail changes: fourteen before → after lines.
    expect(await page.locator('tbody tr[data-row]').count()).toBe(14);
    await page.getByLabel('Field').selectOption('email');
    await page.getByRole('button', { name: 'Filter' }).click();
    await page.waitForURL(/field=email/);
    const rows = page.locator('tbody tr[data-row]');
    expect(await rows.count()).toBe(4);
    expect(await rows.first().locator('td').nth(5).textContent()).toBe('browser0@example.com');

    await page.getByRole('button', { name: 'Approve plan' }).click();
    await page.getByText('Plan approved.').waitFor();
    expect(await page.locator('.actions [data-status]').getAttribute('data-status')).toBe('approved');
    expect(await page.getByRole('button', { name: 'Approve plan' }).count()).toBe(0);
    const stored = await plans.require(plan.id);
    expect(stored.status).toBe('approved');
    expect(await page.locator('p.history').textContent()).toContain(stored.approval!.by);
    await capture(page, 'plan-page.png');

    await page.getByRole('navigation').getByRole('link', { name: 'Plans' }).click();
    await page.getByRole('heading', { name: 'Plans' }).waitFor();
    expect(await line.locator('[data-status]').getAttribute('data-status')).toBe('approved');
    expect(await line.textContent()).toContain(stored.approval!.by);
    await capture(page, 'plans-list.png');
  }, 30_000);

  it('fits a phone: the list and the plan page scroll their tables, not the page; the main action is on screen', async () => {
    const narrow = await context.newPage();
    try {
      await narrow.setViewportSize(PHONE);
      await narrow.goto(`${base}/plans`);
      await expectFitsPhone(narrow, 'plans list', `tr[data-plan="${plan.id}"] a`);
      await narrow.goto(`${base}/plans/${plan.id}`);
      // Approved by the test above: Apply is the page's primary button now.
      await expectFitsPhone(narrow, 'plan page', '.actions button.primary');
      await capture(narrow, 'narrow-plan.png');
    } finally {
      await narrow.close();
    }
  }, 20_000);
});

import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Secret } from '../../src/config/index.js';
import { buildDashboard } from '../../src/dashboard/index.js';
import { PlanStore } from '../../src/plans/index.js';
import type { SimContact } from '../../src/sim/index.js';
import { csv, startHarness, type Harness } from '../helpers/pipeline.js';
import { capture, expectFitsPhone, hasChromium, launchChromium, PHONE, signedInPage } from './browser-setup.js';

/*
 * Issue 45's browser import, end to end in Debian's chromium: a dashboard and workers against the
 * simulator. Upload a contacts CSV, accept the suggested mapping, check every row, make the plan,
 * approve it (the workspace requires approval), apply it, watch the run finish, see the CRM hold
 * the file's values, and Undo them back. Then the same on a larger file with bad rows at two
 * screen sizes, the mapping remembered for a header set, and the flow with the keyboard alone.
 */

const TOKEN = 'import-browser-token-8c1d4e7f2a5b9c3d6e0f';

let h: Harness;
let app: Awaited<ReturnType<typeof buildDashboard>>;
let browser: Browser;
let context: BrowserContext;
let page: Page;
let base: string;
let plans: PlanStore;
let contacts: SimContact[];

beforeAll(async () => {
  if (!hasChromium) return;
  h = await startHarness({ records: 2000, workspace: { requireApproval: true } });
  await h.startWorkers({ concurrency: 32 });
  // Copies: the simulator changes its records in place.
  contacts = [...h.ws.contacts.values()].map((c) => ({ ...c }));
  plans = new PlanStore({ redis: h.runtime.redis, prefix: h.config.prefix });
  app = await buildDashboard({ runtime: h.runtime, token: new Secret(TOKEN) });
  base = await app.listen({ port: 0, host: '127.0.0.1' });
  browser = await launchChromium();
  ({ context, page } = await signedInPage(browser, base, TOKEN, { acceptDownloads: true, timeoutMs: 20_000 }));
}, 90_000);

afterAll(async () => {
  await context?.close();
  await browser?.close();
  await app?.close();
  await h?.close();
});

const snapshot = (list: SimContact[]) =>
  list.map((c) => {
    const now = h.ws.contacts.get(c.id)!;
    return { name: now.name, email: now.email, phone_number: now.phone_number };
  });

/** The run a page's URL names (`/runs/<id>`), once it completed. */
async function runOfPage(p: Page) {
  await p.waitForURL(/\/runs\/[^/?]+$/);
  const id = decodeURIComponent(new URL(p.url()).pathname.split('/')[2]!);
  return h.waitForRun(id, 60_000);
}

/** Upload on the New import page (reached from the runs list's button) and land on the mapping table. */
async function upload(p: Page, file: string): Promise<void> {
  await p.goto(`${base}/`);
  await p.getByRole('link', { name: 'New import' }).click();
  await p.getByRole('heading', { name: 'New import' }).waitFor();
  await p.locator('select[name=op]').selectOption('contact.update');
  await p.getByLabel(/^File/).setInputFiles(file);
  await p.getByRole('button', { name: 'Upload and map columns' }).click();
  await p.getByRole('heading', { name: /Map columns/ }).waitFor();
}

async function fieldOf(p: Page, column: string): Promise<string> {
  return p.getByLabel(`Field for column ${column}`, { exact: true }).inputValue();
}

/** Approve, then apply: the workspace requires approval, so Apply is offered only once approved. */
async function approveAndApply(p: Page): Promise<void> {
  expect(await p.locator('[data-approval="required"]').count()).toBe(1);
  await p.getByRole('button', { name: 'Approve plan' }).click();
  await p.getByText('Plan approved.').waitFor();
  await p.getByRole('button', { name: /^Apply plan/ }).click();
}

describe.skipIf(!hasChromium)('importing from the browser (issue 45)', () => {
  it('Done when: 200 contacts uploaded, mapped as suggested, all valid, planned, approved, applied, then undone', async () => {
    const rows = contacts.slice(0, 200);
    const before = snapshot(rows);
    const file = h.file(
      'contacts-200.csv',
      csv(
        ['E-mail', 'Full name', 'Phone'],
        rows.map((c, i) => [c.email, `Imported ${i} ${c.name}`, `+44 20 7946 ${String(i).padStart(4, '0')}`]),
      ),
    );
    await upload(page, file);
    // The suggestions: the did-you-mean the CLI gives for each header.
    expect(await fieldOf(page, 'E-mail')).toBe('email');
    expect(await fieldOf(page, 'Full name')).toBe('name');
    expect(await fieldOf(page, 'Phone')).toBe('phone_number');
    await page.getByRole('button', { name: 'Check every row' }).click();
    await page.getByText('200 valid', { exact: true }).waitFor();
    expect(await page.locator('[data-kind="invalid"] b').textContent()).toBe('0');

    await page.getByRole('button', { name: 'Make the plan' }).click();
    await page.getByRole('heading', { name: /^Plan · contacts-200\.csv/ }).waitFor();
    const planId = decodeURIComponent(new URL(page.url()).pathname.split('/')[2]!);
    // The same plan object the CLI's `plans show` and `apply` read.
    const plan = await plans.require(planId);
    expect(plan).toMatchObject({ workspace: 'acme', operation: 'contact.update', rows: 200, status: 'pending' });
    expect(plan.counts.update).toBe(200);
    expect(await page.locator('[data-import]').count()).toBe(1);
    // Nothing reached the CRM before Apply.
    expect(snapshot(rows)).toEqual(before);

    await approveAndApply(page);
    const run = await runOfPage(page);
    expect(run.counts).toMatchObject({ succeeded: 200, failed: 0, invalid: 0 });
    expect(snapshot(rows)).toEqual(
      rows.map((c, i) => ({
        name: `Imported ${i} ${c.name}`,
        email: c.email,
        phone_number: `+44 20 7946 ${String(i).padStart(4, '0')}`,
      })),
    );

    // Undo, as on any run page: a plan of the values before, approved and applied the same way.
    await page.reload();
    await page.getByRole('button', { name: 'Undo…' }).click();
    await page.waitForURL(/done=undo/);
    await approveAndApply(page);
    await page.getByText(/Plan applied: run/).waitFor();
    const undoRun = (await plans.require(decodeURIComponent(new URL(page.url()).pathname.split('/')[2]!))).runId!;
    expect((await h.waitForRun(undoRun, 60_000)).counts.succeeded).toBe(200);
    expect(snapshot(rows)).toEqual(before);

    // The import's page keeps file, mapping, plan and run together; the history lists it.
    await page.goto(`${base}/imports`);
    const line = page.locator('tr[data-import]', { hasText: 'contacts-200.csv' });
    expect(await line.locator('[data-result="run"]').textContent()).toContain('200 succeeded');
    await line.getByRole('link', { name: 'contacts-200.csv' }).click();
    await page.getByRole('heading', { name: 'Import · contacts-200.csv' }).waitFor();
    expect(await page.locator('main').textContent()).toContain('E-mail');
  }, 120_000);

  it('2,000 rows with 20 bad e-mails and an unknown column, at 1280 × 800 and 390 × 844', async () => {
    const bad = new Set(Array.from({ length: 20 }, (_, i) => 7 + i * 97));
    const lines = Array.from({ length: 2000 }, (_, i) => {
      const c = contacts[i]!;
      const email = bad.has(i) ? `not-an-address-${i}` : c.email;
      // A spreadsheet formula in an unknown column: shown as text, escaped in the CSV download.
      return [email, `Big ${i}`, c.phone_number, i === 1 ? '=HYPERLINK("http://x.example","<b>x</b>")' : `note ${i}`];
    });
    const file = h.file('contacts-2000.csv', csv(['E-mail', 'Full name', 'Phone', 'Notes'], lines));
    await upload(page, file);
    const importPath = new URL(page.url()).pathname.replace(/\/mapping$/, '');
    // The unknown column maps to nothing and is skipped unless chosen; its formula shows as text.
    expect(await fieldOf(page, 'Notes')).toBe('');
    expect(await page.locator('tr[data-column="Notes"] td.samples').textContent()).toContain(
      '=HYPERLINK("http://x.example","<b>x</b>")',
    );
    expect(await page.locator('tr[data-column="Notes"] td.samples b').count()).toBe(0);
    await capture(page, 'import-mapping.png', { docs: true });
    await page.getByRole('button', { name: 'Check every row' }).click();
    await page.getByText('1,980 valid', { exact: true }).waitFor();
    expect(await page.getByText('20 invalid', { exact: true }).count()).toBe(1);
    // One cause, the values masked; the first invalid rows with line, column and reason.
    const group = page.locator('tr[data-group]');
    expect(await group.count()).toBe(1);
    expect(await group.locator('td.num').textContent()).toBe('20');
    expect(await group.textContent()).not.toContain('not-an-address');
    const first = page.locator('table.invalid-rows tbody tr').first();
    expect(await first.locator('td').nth(0).textContent()).toBe('8');
    expect(await first.locator('td').nth(1).textContent()).toBe('9');
    expect(await first.locator('td').nth(2).textContent()).toContain('E-mail');
    await capture(page, 'import-check.png', { docs: true });
    const [download] = await Promise.all([
      page.waitForEvent('download'),
      page.getByRole('link', { name: 'Download invalid rows (CSV)' }).click(),
    ]);
    const text = (await (await download.createReadStream()).toArray()).join('');
    expect(text.trim().split('\n')).toHaveLength(21);

    // Back to the mapping without a new upload: skip the e-mail column … the file can no longer match.
    await page.getByRole('link', { name: 'Change the mapping' }).first().click();
    await page.getByLabel('Field for column E-mail', { exact: true }).selectOption('');
    await page.getByRole('button', { name: 'Check every row' }).click();
    await page.locator('[data-check="failed"]').waitFor();
    expect(await page.locator('[data-check="failed"]').textContent()).toContain('E-mail');
    await page.getByRole('link', { name: 'Change the mapping' }).first().click();
    await page.getByLabel('Field for column E-mail', { exact: true }).selectOption('email');
    await page.getByRole('button', { name: 'Check every row' }).click();
    await page.getByText('1,980 valid', { exact: true }).waitFor();

    await page.getByRole('button', { name: 'Make the plan' }).click();
    await page.getByRole('heading', { name: /^Plan · contacts-2000\.csv/ }).waitFor();
    await capture(page, 'import-plan.png');
    const planId = decodeURIComponent(new URL(page.url()).pathname.split('/')[2]!);
    // A row whose key is no address matches no contact: the plan, which matches first, says not-found.
    expect((await plans.require(planId)).counts).toMatchObject({ update: 1980, 'not-found': 20 });
    await approveAndApply(page);
    const run = await runOfPage(page);
    expect(run.counts.succeeded).toBe(1980);
    expect(h.ws.contacts.get(contacts[0]!.id)!.name).toBe('Big 0');
    await page.reload();
    await capture(page, 'import-run.png');

    // Undo: the 1,980 values before, back where the CRM still holds what the run wrote.
    await page.getByRole('button', { name: 'Undo…' }).click();
    await page.waitForURL(/done=undo/);
    await approveAndApply(page);
    await page.getByText(/Plan applied: run/).waitFor();
    const undoRun = (await plans.require(decodeURIComponent(new URL(page.url()).pathname.split('/')[2]!))).runId!;
    expect((await h.waitForRun(undoRun, 60_000)).counts.succeeded).toBe(1980);
    expect(h.ws.contacts.get(contacts[0]!.id)!.name).toBe(contacts[0]!.name);

    // The same pages on a phone: the import's steps, each main action on screen.
    const narrow = await context.newPage();
    narrow.setDefaultTimeout(20_000);
    try {
      await narrow.setViewportSize(PHONE);
      await narrow.goto(`${base}/imports/new`);
      await expectFitsPhone(narrow, 'new import', 'form.import-form button.primary');
      await capture(narrow, 'narrow-import-new.png');
      await narrow.goto(`${base}${importPath}/mapping`);
      await expectFitsPhone(narrow, 'mapping', 'form button.primary');
      await capture(narrow, 'narrow-import-mapping.png');
      await narrow.goto(`${base}${importPath}/check`);
      await expectFitsPhone(narrow, 'check', '.actions button.primary');
      await capture(narrow, 'narrow-import-check.png');
      await narrow.goto(`${base}/plans/${planId}`);
      await expectFitsPhone(narrow, 'plan', '.actions a');
      await capture(narrow, 'narrow-import-plan.png');
      await narrow.goto(`${base}${importPath}`);
      await expectFitsPhone(narrow, 'import page', 'main .actions a');
      await capture(narrow, 'narrow-import.png');
      await narrow.goto(`${base}/imports`);
      await expectFitsPhone(narrow, 'imports', 'main .actions a.button');
      await capture(narrow, 'narrow-imports.png');
    } finally {
      await narrow.close();
    }
  }, 150_000);

  it('on a phone: a small import planned, then discarded from its page; the plan is discarded and the file gone', async () => {
    const narrow = await context.newPage();
    narrow.setDefaultTimeout(20_000);
    try {
      await narrow.setViewportSize(PHONE);
      const rows = contacts.slice(0, 5);
      await upload(
        narrow,
        h.file(
          'discard-me.csv',
          csv(
            ['E-mail', 'Full name'],
            rows.map((c) => [c.email, 'X']),
          ),
        ),
      );
      const importId = decodeURIComponent(new URL(narrow.url()).pathname.split('/')[3]!);
      await narrow.getByRole('button', { name: 'Check every row' }).click();
      await narrow.getByText('5 valid', { exact: true }).waitFor();
      await narrow.getByRole('button', { name: 'Make the plan' }).click();
      await narrow.getByRole('heading', { name: /^Plan · discard-me\.csv/ }).waitFor();
      await expectFitsPhone(narrow, 'pending plan', '.actions button.primary');
      const planId = decodeURIComponent(new URL(narrow.url()).pathname.split('/')[2]!);
      await narrow.getByRole('link', { name: 'discard-me.csv' }).click();
      await narrow.getByRole('heading', { name: 'Import · discard-me.csv' }).waitFor();
      await narrow.getByRole('button', { name: 'Discard import' }).click();
      await narrow.getByText('file removed').first().waitFor();
      expect((await plans.require(planId)).status).toBe('discarded');
      expect(existsSync(join(h.config.resultsDir, 'dashboard-imports', 'acme', importId))).toBe(false);
      expect(rows.map((c) => h.ws.contacts.get(c.id)!.name)).toEqual(rows.map((c) => c.name));
    } finally {
      await narrow.close();
    }
  }, 30_000);

  it('remembers the mapping of a header set for the next upload in the workspace', async () => {
    const rows = contacts.slice(0, 5);
    const content = csv(
      ['Email address', 'Mobile', 'Who'],
      rows.map((c, i) => [c.email, `+1 555 010${i}`, c.name]),
    );
    await upload(page, h.file('mobiles-1.csv', content));
    expect(await fieldOf(page, 'Email address')).toBe('email');
    expect(await fieldOf(page, 'Mobile')).toBe('');
    await page.getByLabel('Field for column Mobile', { exact: true }).selectOption('phone_number');
    await page.getByLabel('Field for column Who', { exact: true }).selectOption('name');
    await page.getByRole('button', { name: 'Check every row' }).click();
    await page.getByText('5 valid', { exact: true }).waitFor();

    await upload(page, h.file('mobiles-2.csv', content));
    expect(await fieldOf(page, 'Mobile')).toBe('phone_number');
    expect(await fieldOf(page, 'Who')).toBe('name');
    expect(await page.locator('tr[data-column="Mobile"]').textContent()).toContain('last used for these columns');
  }, 60_000);

  it('Tab and Enter alone complete the flow, from the runs list to the applied run', async () => {
    const rows = contacts.slice(0, 10);
    const file = h.file(
      'keyboard.csv',
      csv(
        ['E-mail', 'Full name'],
        rows.map((c, i) => [c.email, `Keys ${i}`]),
      ),
    );
    const keys = await context.newPage();
    keys.setDefaultTimeout(20_000);
    /** Tab until the focused element is `name` (an accessible name), then Enter. */
    const press = async (name: string) => {
      for (let i = 0; i < 80; i++) {
        await keys.keyboard.press('Tab');
        const focused = (await keys.evaluate(
          `(() => { const a = document.activeElement; return a ? (a.getAttribute('aria-label') || a.textContent || '').trim() : ''; })()`,
        )) as string;
        if (focused === name) {
          await keys.keyboard.press('Enter');
          return;
        }
      }
      throw new Error(`Tab never reached "${name}"`);
    };
    /** Tab until the element `selector` finds has the focus. */
    const focusBy = async (selector: string) => {
      for (let i = 0; i < 80; i++) {
        await keys.keyboard.press('Tab');
        if (
          (await keys.evaluate(`document.activeElement === document.querySelector(${JSON.stringify(selector)})`)) ===
          true
        )
          return;
      }
      throw new Error(`Tab never reached ${selector}`);
    };
    try {
      await keys.goto(`${base}/`);
      await press('New import');
      await keys.getByRole('heading', { name: 'New import' }).waitFor();
      // The file is chosen by a file dialog a headless browser does not have; the rest is keys.
      await keys.getByLabel(/^File/).setInputFiles(file);
      await focusBy('select[name=op]');
      await keys.keyboard.type('Update c'); // a select's type-ahead picks "Update contacts"
      expect(await keys.locator('select[name=op]').inputValue()).toBe('contact.update');
      await press('Upload and map columns');
      await keys.getByRole('heading', { name: /Map columns/ }).waitFor();
      await press('Check every row');
      await keys.getByText('10 valid', { exact: true }).waitFor();
      await press('Make the plan');
      await keys.getByRole('heading', { name: /^Plan · keyboard\.csv/ }).waitFor();
      await press('Approve plan');
      await keys.getByText('Plan approved.').waitFor();
      const planId = decodeURIComponent(new URL(keys.url()).pathname.split('/')[2]!);
      await press(`Apply plan ${planId}`);
      const run = await runOfPage(keys);
      expect(run.counts.succeeded).toBe(10);
      expect(h.ws.contacts.get(rows[3]!.id)!.name).toBe('Keys 3');
    } finally {
      await keys.close();
    }
  }, 60_000);
});

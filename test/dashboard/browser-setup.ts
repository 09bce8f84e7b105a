import { copyFileSync, existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { chromium, type Browser, type BrowserContext, type BrowserContextOptions, type Page } from 'playwright-core';
import { expect } from 'vitest';

/** What the dashboard's browser tests share: Debian's chromium, where screenshots go. */
export const CHROMIUM = '/usr/bin/chromium';
export const ARTIFACTS = join(import.meta.dirname, '..', 'artifacts');
export const DOCS = join(import.meta.dirname, '..', '..', 'docs');
// The machine has no internet: without these chromium stalls on lookups it makes at start.
const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

// CI installs chromium (.ci/run), so there a missing browser is a failure, not a skip.
export const hasChromium = existsSync(CHROMIUM) || Boolean(process.env.CI);
if (!hasChromium)
  console.warn(`[dashboard browser test] skipped: ${CHROMIUM} is missing (apt-get install -y chromium)`);

export function launchChromium(): Promise<Browser> {
  mkdirSync(ARTIFACTS, { recursive: true });
  return chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
}

/** Signs `page` in to the dashboard at `base` with `token` and waits for the runs list. */
export async function signIn(page: Page, base: string, token: string): Promise<void> {
  await page.goto(`${base}/login`);
  await page.getByLabel('Token').fill(token);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('heading', { name: 'Runs' }).waitFor();
}

/** A context of its own (1280 × 800 unless `options` says) and a page in it, signed in. */
export async function signedInPage(
  browser: Browser,
  base: string,
  token: string,
  options: BrowserContextOptions & { timeoutMs?: number } = {},
): Promise<{ context: BrowserContext; page: Page }> {
  const { timeoutMs = 10_000, ...contextOptions } = options;
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 }, ...contextOptions });
  const page = await context.newPage();
  page.setDefaultTimeout(timeoutMs);
  await signIn(page, base, token);
  return { context, page };
}

/** A screenshot in test/artifacts goes to docs/ too when docs/ has none, or with CRM_SYNC_UPDATE_DOCS=1. */
export function toDocs(name: string): void {
  if (!existsSync(join(DOCS, name)) || process.env.CRM_SYNC_UPDATE_DOCS === '1') {
    mkdirSync(DOCS, { recursive: true });
    copyFileSync(join(ARTIFACTS, name), join(DOCS, name));
  }
}

/** How many times a screenshot is tried before its error is the test's. */
const SHOT_TRIES = 3;

/**
 * A full-page screenshot into test/artifacts (and docs/ by toDocs when `docs`). A CI run saw one
 * capture of the live run page, which reloads itself every 3 s, get no answer for its whole 15 s on
 * a loaded machine; here 40 captures of a page reloading every 1.5 s all answered within 0.7 s, so
 * such a wait is rare and not the page's fault. A screenshot is an artifact, not what a test checks:
 * each try has its own timeout, and the next one starts from a loaded page.
 */
export async function capture(page: Page, name: string, options: { docs?: boolean } = {}): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      await page.screenshot({ path: join(ARTIFACTS, name), fullPage: true, timeout: 10_000 });
      break;
    } catch (err) {
      if (attempt >= SHOT_TRIES) throw err;
      await page.waitForLoadState('load').catch(() => undefined);
    }
  }
  if (options.docs) toDocs(name);
}

/** A phone's screen (issue 46): every page is checked at this size. */
export const PHONE = { width: 390, height: 844 } as const;

/** Where an element is, in page coordinates (top and bottom include the page's scroll). */
export interface Box {
  left: number;
  right: number;
  top: number;
  bottom: number;
}

export interface PhoneLayout {
  /** document.documentElement.scrollWidth: wider than `innerWidth` means the page scrolls sideways. */
  scrollWidth: number;
  innerWidth: number;
  /** The first element each selector finds, or null when it finds none. */
  boxes: Array<Box | null>;
}

/**
 * The page's width and where the named elements are. A button at the right end of a table that
 * scrolls in its box has its box beyond `innerWidth` (getBoundingClientRect ignores the clipping),
 * so `right <= innerWidth` says it is on screen without scrolling anything sideways.
 */
export async function phoneLayout(page: Page, selectors: string[]): Promise<PhoneLayout> {
  // A string: the tests are type-checked without the DOM library; the browser evaluates it.
  return (await page.evaluate(`(() => {
    const boxes = ${JSON.stringify(selectors)}.map((s) => {
      const el = document.querySelector(s);
      if (!el) return null;
      const r = el.getBoundingClientRect();
      return { left: r.left, right: r.right, top: r.top + window.scrollY, bottom: r.bottom + window.scrollY };
    });
    return { scrollWidth: document.documentElement.scrollWidth, innerWidth: window.innerWidth, boxes };
  })()`)) as PhoneLayout;
}

/**
 * The page does not scroll sideways and its main action (`action`) is within the screen's width.
 * Soft assertions: a page that fails shows every way it does, and the test goes on to the next page.
 */
export async function expectFitsPhone(page: Page, what: string, action: string): Promise<PhoneLayout> {
  const layout = await phoneLayout(page, [action]);
  expect(layout.innerWidth, what).toBe(PHONE.width);
  expect.soft(layout.scrollWidth, `${what}: the page scrolls sideways`).toBeLessThanOrEqual(layout.innerWidth);
  const box = layout.boxes[0] ?? null;
  expect.soft(box, `${what}: no ${action}`).not.toBeNull();
  if (box === null) return layout;
  expect.soft(box.left, `${what}: ${action} is off the left edge`).toBeGreaterThanOrEqual(0);
  expect.soft(box.right, `${what}: ${action} is off the right edge`).toBeLessThanOrEqual(layout.innerWidth);
  return layout;
}

import { copyFileSync, existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { chromium, type Browser } from 'playwright-core';

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

/** A screenshot in test/artifacts goes to docs/ too when docs/ has none, or with CRM_SYNC_UPDATE_DOCS=1. */
export function toDocs(name: string): void {
  if (!existsSync(join(DOCS, name)) || process.env.CRM_SYNC_UPDATE_DOCS === '1') {
    mkdirSync(DOCS, { recursive: true });
    copyFileSync(join(ARTIFACTS, name), join(DOCS, name));
  }
}

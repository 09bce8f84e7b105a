#!/usr/bin/env node
// Runs the compiled dist/cli.js whenever it was built from the sources as they are now (its
// dist/.build-stamp matches the hash of src/, see scripts/source-stamp.js); otherwise, in a
// source checkout with edits since the last `npm run build`, the TypeScript itself through tsx.
// A packed package or an image has no src/: dist/ is all there is.
// CRM_SYNC_BIN_TRACE=1 says on stderr which one was chosen and why.
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const dist = new URL('../dist/cli.js', import.meta.url);
const src = new URL('../src/cli.ts', import.meta.url);
const trace = process.env.CRM_SYNC_BIN_TRACE ? (line) => process.stderr.write(`crm-sync bin: ${line}\n`) : () => {};

let why = 'no src/';
if (existsSync(src)) {
  const { builtStamp, sourceStamp } = await import('../scripts/source-stamp.js');
  const built = builtStamp(root);
  why = built === undefined ? 'no build stamp' : built === sourceStamp(root) ? 'build stamp matches' : 'stale';
}
if (why === 'no src/' || why === 'build stamp matches') {
  trace(`dist (${why})`);
  await import(dist.href);
} else {
  trace(`tsx (${why === 'stale' ? 'src/ changed since the last npm run build' : why})`);
  const { register } = await import('tsx/esm/api');
  register();
  await import(src.href);
}

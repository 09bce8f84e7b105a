#!/usr/bin/env node
// Runs the compiled CLI whenever it was built from the sources as they are now (its
// dist/.build-stamp matches the hash of src/, see scripts/source-stamp.js); otherwise, in a
// source checkout with edits since the last `npm run build`, the TypeScript itself through tsx.
// A packed package or an image has no src/: dist/ is all there is. Compiled, it is the bundle
// (dist/bundle/cli.js: a process starts in about half the CPU, scripts/build.js), except with
// an OTEL_* variable set: tracing patches modules as they load, so those run unbundled.
// CRM_SYNC_BIN_TRACE=1 says on stderr which one was chosen and why.
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const tracing = Object.keys(process.env).some((name) => name.startsWith('OTEL_'));
const bundled = new URL('../dist/bundle/cli.js', import.meta.url);
const dist = !tracing && existsSync(bundled) ? bundled : new URL('../dist/cli.js', import.meta.url);
const src = new URL('../src/cli.ts', import.meta.url);
const trace = process.env.CRM_SYNC_BIN_TRACE ? (line) => process.stderr.write(`crm-sync bin: ${line}\n`) : () => {};

let why = 'no src/';
if (existsSync(src)) {
  const { builtStamp, sourceStamp } = await import('../scripts/source-stamp.js');
  const built = builtStamp(root);
  why = built === undefined ? 'no build stamp' : built === sourceStamp(root) ? 'build stamp matches' : 'stale';
}
if (why === 'no src/' || why === 'build stamp matches') {
  trace(`${dist === bundled ? 'dist/bundle' : 'dist'} (${why})`);
  await import(dist.href);
} else {
  trace(`tsx (${why === 'stale' ? 'src/ changed since the last npm run build' : why})`);
  const { register } = await import('tsx/esm/api');
  register();
  await import(src.href);
}

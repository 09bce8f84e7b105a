// `npm run build` (and `prepare`, so `npm ci` builds): compile src/ with tsconfig.build.json into
// a fresh directory, stamp it with the hash of the sources it was compiled from, then swap it in
// for dist/. A failed compile leaves the previous dist/ (and its stamp) as they were, and a
// process starting meanwhile sees either the old dist/ or the new one, never half of one.
// Plain node (no tsx): it runs before anything else is built.
// A dist/ already built from these very sources (its stamp matches) is left as it is, unless
// `--force`: `npx crm-sync` inside a clone installs the clone into npx's cache and runs its
// `prepare` again, silently — a whole tsc compile (13–29 s on a loaded 2-core machine) before
// the first line of output, after `npm ci` had just built the same dist/. Same for `npm link`.
import { spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, readdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { STAMP_FILE, builtStamp, sourceStamp } from './source-stamp.js';

const root = fileURLToPath(new URL('..', import.meta.url));
const dist = join(root, 'dist');
const fresh = join(root, `.dist-build-${process.pid}`);
const old = join(root, `.dist-old-${process.pid}`);

// Hashed before compiling: a source edited during the compile makes the stamp stale (the bin
// then runs the sources), never a stamp that claims sources the build did not see.
const stamp = sourceStamp(root);
if (!process.argv.includes('--force') && builtStamp(root) === stamp) {
  console.error(
    'build: dist/ is already built from these sources (dist/.build-stamp); nothing to do (--force rebuilds)',
  );
  process.exit(0);
}
let tsc;
try {
  tsc = join(dirname(createRequire(import.meta.url).resolve('typescript/package.json')), 'bin', 'tsc');
} catch {
  // `npm ci --omit=dev` in a checkout: nothing can compile (or run) the sources here.
  console.error(
    'build: typescript is not installed (dev dependencies omitted?): run `npm ci` to build, or install the published package, which ships dist/',
  );
  process.exit(1);
}
rmSync(fresh, { recursive: true, force: true });
const compiled = spawnSync(process.execPath, [tsc, '-p', 'tsconfig.build.json', '--outDir', fresh], {
  cwd: root,
  stdio: 'inherit',
});
if (compiled.status !== 0) {
  rmSync(fresh, { recursive: true, force: true });
  console.error(`build: tsc failed (exit ${compiled.status ?? compiled.signal}); dist/ left as it was`);
  process.exit(1);
}
// tsc emits only JavaScript: the Lua scripts (src/redis/commands) are read beside their loader at
// run time, so they go to the same place under dist/.
for (const rel of readdirSync(join(root, 'src'), { recursive: true })) {
  if (!String(rel).endsWith('.lua')) continue;
  mkdirSync(dirname(join(fresh, rel)), { recursive: true });
  copyFileSync(join(root, 'src', rel), join(fresh, rel));
}
writeFileSync(join(fresh, STAMP_FILE.slice('dist/'.length)), `${stamp}\n`);
if (existsSync(dist)) renameSync(dist, old);
renameSync(fresh, dist);
rmSync(old, { recursive: true, force: true });

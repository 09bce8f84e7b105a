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
import { copyFileSync, cpSync, existsSync, mkdirSync, readdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
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
await bundleCli(fresh);
writeFileSync(join(fresh, STAMP_FILE.slice('dist/'.length)), `${stamp}\n`);
if (existsSync(dist)) renameSync(dist, old);
renameSync(fresh, dist);
rmSync(old, { recursive: true, force: true });

/**
 * The CLI bundled (dist/bundle/, esbuild): every `crm-sync` process starts by loading modules —
 * 835 files for an `import` — and that was most of its CPU (0.75 s of 0.8 s for a 2-row import,
 * Node 20); bundled, 0.42 s. Split at the dynamic imports, so `--help` and `runs list` still load
 * only what they use. Left out, loaded from node_modules as they are: what reads its own files
 * beside it at run time (the dashboard's server, plugins and assets, pino's transports, pg, a
 * native add-on) and OpenTelemetry, which must see modules as they load to patch them (the bin
 * runs dist/cli.js unbundled whenever an OTEL_* variable is set). The chunks sit two levels under
 * the root like every dist/ module, so the sources' `import.meta.url` paths (package.json,
 * samples/) hold; the Lua scripts are copied beside them.
 */
async function bundleCli(out) {
  let esbuild;
  try {
    esbuild = await import('esbuild');
  } catch {
    console.error('build: esbuild is not installed; the CLI runs unbundled from dist/cli.js');
    return;
  }
  const bundle = join(out, 'bundle');
  const built = await esbuild.build({
    entryPoints: [join(out, 'cli.js')],
    outdir: bundle,
    bundle: true,
    splitting: true,
    format: 'esm',
    platform: 'node',
    target: 'node20',
    sourcemap: 'linked',
    logLevel: 'warning',
    metafile: true,
    external: [
      'fastify',
      '@fastify/*',
      '@bull-board/*',
      '@opentelemetry/*',
      'bullmq-otel',
      'pino',
      'pino-pretty',
      'pg',
      'pg-cursor',
      'uplot',
      'msgpackr-extract',
    ],
    // CommonJS packages inside an ES module bundle still call require() for Node's own modules.
    banner: {
      js: "import { createRequire as bundleRequire } from 'node:module'; const require = bundleRequire(import.meta.url);",
    },
  });
  // Which packages each file of the bundle holds: what a command loads is still known
  // (test/cli/cli-startup.test.ts: `--help` loads none of the heavy ones).
  const packages = {};
  for (const [file, output] of Object.entries(built.metafile.outputs)) {
    if (!file.endsWith('.js')) continue;
    const held = new Set();
    for (const input of Object.keys(output.inputs)) {
      const name = /(?:^|\/)node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(input)?.[1];
      if (name) held.add(name);
    }
    packages[file.split('/').pop()] = [...held].sort();
  }
  writeFileSync(join(bundle, 'packages.json'), `${JSON.stringify(packages, null, 1)}\n`);
  // The Lua scripts already copied under dist/redis/, beside the loader that reads them.
  cpSync(join(out, 'redis', 'commands'), join(bundle, 'commands'), { recursive: true });
}

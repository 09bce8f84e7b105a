import { execFile } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { STAMP_FILE, builtStamp, sourceStamp } from '../../scripts/source-stamp.js';
import { deleteKeysWithPrefix } from '../../src/runtime/index.js';
import { TEST_REDIS_URL, testPrefix } from '../helpers/redis.js';

const run = promisify(execFile);
const root = fileURLToPath(new URL('../..', import.meta.url));
const dirs: string[] = [];

afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/**
 * A package laid out like crm-sync's, small enough to edit: the real bin and stamp module, a
 * src/cli.ts and a dist/cli.js that each say which one ran, tsx from this checkout.
 */
function fixture(): string {
  const dir = mkdtempSync(join(tmpdir(), 'crm-sync-bin-'));
  dirs.push(dir);
  mkdirSync(join(dir, 'bin'));
  mkdirSync(join(dir, 'scripts'));
  mkdirSync(join(dir, 'src', 'cli'), { recursive: true });
  mkdirSync(join(dir, 'dist'));
  cpSync(join(root, 'bin', 'crm-sync.js'), join(dir, 'bin', 'crm-sync.js'));
  cpSync(join(root, 'scripts', 'source-stamp.js'), join(dir, 'scripts', 'source-stamp.js'));
  symlinkSync(join(root, 'node_modules'), join(dir, 'node_modules'), 'dir');
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'fixture', version: '1.0.0', type: 'module' }));
  writeFileSync(join(dir, 'tsconfig.json'), '{}\n');
  writeFileSync(join(dir, 'src', 'cli.ts'), "const from: string = 'src';\nconsole.log(from);\n");
  writeFileSync(join(dir, 'src', 'cli', 'part.ts'), 'export {};\n');
  writeFileSync(join(dir, 'dist', 'cli.js'), "console.log('dist');\n");
  writeFileSync(join(dir, STAMP_FILE), `${sourceStamp(dir)}\n`);
  return dir;
}

async function bin(dir: string): Promise<{ ran: string; trace: string }> {
  const { stdout, stderr } = await run(process.execPath, [join(dir, 'bin', 'crm-sync.js')], {
    cwd: dir,
    env: { ...process.env, CRM_SYNC_BIN_TRACE: '1' },
  });
  return { ran: stdout.trim(), trace: stderr.trim() };
}

describe('the build stamp', () => {
  it('changes with any file under src/, a tsconfig or the version, and with nothing else', () => {
    const dir = fixture();
    const stamp = sourceStamp(dir);
    expect(builtStamp(dir)).toBe(stamp);
    expect(sourceStamp(dir)).toBe(stamp);

    writeFileSync(join(dir, 'README.md'), 'docs are not compiled\n');
    expect(sourceStamp(dir)).toBe(stamp);

    const changed = new Set([stamp]);
    writeFileSync(join(dir, 'src', 'cli', 'part.ts'), 'export const x = 1;\n');
    changed.add(sourceStamp(dir));
    writeFileSync(join(dir, 'src', 'cli', 'new.ts'), 'export {};\n');
    changed.add(sourceStamp(dir));
    writeFileSync(join(dir, 'tsconfig.build.json'), '{}\n');
    changed.add(sourceStamp(dir));
    writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'fixture', version: '1.0.1', type: 'module' }));
    changed.add(sourceStamp(dir));
    // The bundle holds the dependencies: a new lockfile, or a new build script, is a new build.
    writeFileSync(join(dir, 'package-lock.json'), '{}\n');
    changed.add(sourceStamp(dir));
    writeFileSync(join(dir, 'scripts', 'build.js'), '// another build\n');
    changed.add(sourceStamp(dir));
    expect(changed.size).toBe(7);
  });

  it('the bin runs dist/ when the stamp matches, the sources through tsx when they changed or were never built, dist/ when there are no sources', async () => {
    const dir = fixture();
    expect(await bin(dir)).toEqual({ ran: 'dist', trace: 'crm-sync bin: dist (build stamp matches)' });

    writeFileSync(join(dir, 'src', 'cli', 'part.ts'), 'export const edited = true;\n');
    expect(await bin(dir)).toEqual({
      ran: 'src',
      trace: 'crm-sync bin: tsx (src/ changed since the last npm run build)',
    });

    rmSync(join(dir, STAMP_FILE));
    expect(await bin(dir)).toEqual({ ran: 'src', trace: 'crm-sync bin: tsx (no build stamp)' });

    rmSync(join(dir, 'src'), { recursive: true });
    expect(await bin(dir)).toEqual({ ran: 'dist', trace: 'crm-sync bin: dist (no src/)' });
  });

  it('prepare leaves a dist/ built from these sources as it is: `npx crm-sync` in a clone runs it again (issue 46, item 7)', async () => {
    const dir = fixture();
    cpSync(join(root, 'scripts', 'build.js'), join(dir, 'scripts', 'build.js'));
    writeFileSync(join(dir, STAMP_FILE), `${sourceStamp(dir)}\n`);
    const built = await run(process.execPath, [join(dir, 'scripts', 'build.js')], { cwd: dir });
    expect(built.stderr).toContain('build: dist/ is already built from these sources');
    expect(readFileSync(join(dir, 'dist', 'cli.js'), 'utf8')).toBe("console.log('dist');\n");
    // Sources changed since: it compiles (here the fixture has no tsconfig.build.json, so tsc fails
    // and leaves dist/ as it was — what matters is that it tried).
    writeFileSync(join(dir, 'src', 'cli', 'part.ts'), 'export const edited = true;\n');
    const stale = await run(process.execPath, [join(dir, 'scripts', 'build.js')], { cwd: dir }).catch(
      (err: { stderr: string }) => err,
    );
    expect(stale.stderr).not.toContain('already built');
    expect(stale.stderr).toContain('build: tsc failed');
  });
});

describe('what a command loads', () => {
  const prefix = testPrefix('cli-startup');
  let redis: Redis;
  beforeAll(() => {
    redis = new Redis(TEST_REDIS_URL);
  });
  afterAll(async () => {
    await deleteKeysWithPrefix(redis, prefix);
    redis.disconnect();
  });

  /**
   * The packages a `crm-sync …` process loaded, whether the bin chose the bundle (each of its
   * files stands for the packages it holds, dist/bundle/packages.json), dist/ or the sources.
   */
  async function packagesLoaded(args: string[], config?: object): Promise<Set<string>> {
    const dir = mkdtempSync(join(tmpdir(), 'crm-sync-loads-'));
    dirs.push(dir);
    const log = join(dir, 'loaded.txt');
    const configArgs: string[] = [];
    if (config) {
      writeFileSync(join(dir, 'crm-sync.config.json'), JSON.stringify(config));
      configArgs.push('--config', join(dir, 'crm-sync.config.json'));
    }
    await run(
      process.execPath,
      ['--import', './test/helpers/load-recorder.mjs', 'bin/crm-sync.js', ...configArgs, ...args],
      {
        cwd: root,
        env: { ...process.env, CRM_SYNC_LOAD_LOG: log, REDIS_URL: TEST_REDIS_URL, CRM_SYNC_PREFIX: prefix },
      },
    );
    const urls = readFileSync(log, 'utf8').split('\n');
    const packages = urls
      .map((url) => /\/node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(url)?.[1])
      .filter((p): p is string => p !== undefined);
    const chunks = urls.map((url) => /\/dist\/bundle\/([^/]+\.js)$/.exec(url)?.[1]).filter((f) => f !== undefined);
    if (chunks.length > 0) {
      const held = JSON.parse(readFileSync(join(root, 'dist', 'bundle', 'packages.json'), 'utf8')) as Record<
        string,
        string[]
      >;
      for (const chunk of chunks) packages.push(...(held[chunk] ?? [`unknown bundle file ${chunk}`]));
    }
    return new Set(packages);
  }

  const HEAVY = ['bullmq', 'ioredis', 'fastify', 'got', 'pg', 'pino', 'zod', '@opentelemetry/api'];

  // Needs dist/ built from these sources (npm ci builds it; after an edit, npm run build).
  it.skipIf(builtStamp(root) !== sourceStamp(root))(
    'the bin runs the bundle when it is built, and dist/cli.js when an OTEL_* variable asks for tracing',
    async () => {
      const trace = async (env: NodeJS.ProcessEnv) =>
        (await run(process.execPath, ['bin/crm-sync.js', '--version'], { cwd: root, env: { ...process.env, ...env } }))
          .stderr;
      expect(await trace({ CRM_SYNC_BIN_TRACE: '1' })).toContain('crm-sync bin: dist/bundle (build stamp matches)');
      expect(await trace({ CRM_SYNC_BIN_TRACE: '1', OTEL_SDK_DISABLED: 'true' })).toContain(
        'crm-sync bin: dist (build stamp matches)',
      );
    },
  );

  it('--version prints the package version and loads nothing heavy', async () => {
    const { stdout } = await run(process.execPath, ['bin/crm-sync.js', '--version'], { cwd: root });
    const { version } = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { version: string };
    expect(stdout.trim()).toBe(version);
    const loaded = await packagesLoaded(['--version']);
    expect(HEAVY.filter((p) => loaded.has(p))).toEqual([]);
  }, 60_000);

  it.each([
    ['--help'],
    ['runs', '--help'],
    ['import', '--help'],
    ['worker', '--help'],
    ['dashboard', '--help'],
    ['plan', '--help'],
    ['plans', '--help'],
    ['apply', '--help'],
  ])(
    '%s %s loads commander and none of the heavy modules',
    async (...args: string[]) => {
      const loaded = await packagesLoaded(args);
      expect(loaded).toContain('commander');
      expect(HEAVY.filter((p) => loaded.has(p))).toEqual([]);
    },
    60_000,
  );

  it('runs list opens the run store over ioredis without loading BullMQ, the CRM client or the dashboard', async () => {
    const loaded = await packagesLoaded(['runs', 'list']);
    expect(loaded).toContain('ioredis');
    expect(['bullmq', 'fastify', 'got', 'pg', '@opentelemetry/sdk-trace-node'].filter((p) => loaded.has(p))).toEqual(
      [],
    );
  }, 60_000);

  it('an import of a file never loads the PostgreSQL driver: pg is loaded when a database source is read', async () => {
    const workspace = { baseUrl: 'http://127.0.0.1:9/v2', apiKeyEnv: 'CRM_SYNC_STARTUP_TEST_KEY' };
    const dir = mkdtempSync(join(tmpdir(), 'crm-sync-loads-file-'));
    dirs.push(dir);
    writeFileSync(join(dir, 'deals.csv'), 'id,name\n1,Renamed\n');
    const loaded = await packagesLoaded(
      ['import', join(dir, 'deals.csv'), '--op', 'deal.update', '-w', 'acme', '--dry-run'],
      { workspaces: { acme: workspace } },
    );
    // It did read and validate the file: the row decoder's schemas come from zod.
    expect(loaded).toContain('zod');
    expect(['pg', 'pg-cursor'].filter((p) => loaded.has(p))).toEqual([]);
  }, 60_000);
});

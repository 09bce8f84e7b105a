import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { builtStamp, sourceStamp } from '../../scripts/source-stamp.js';
import { deleteKeysWithPrefix } from '../../src/runtime/index.js';
import { TEST_REDIS_URL, testPrefix } from '../helpers/redis.js';

const run = promisify(execFile);
const root = fileURLToPath(new URL('../..', import.meta.url));
const redisUrl = TEST_REDIS_URL;
const prefix = testPrefix('pack');
const dir = mkdtempSync(join(tmpdir(), 'crm-sync-pack-'));
const project = join(dir, 'project');

// A child npm must not inherit `npm test`'s own npm_* settings (package, prefix, lifecycle).
const env: NodeJS.ProcessEnv = Object.fromEntries(
  Object.entries(process.env).filter(([k]) => !k.toLowerCase().startsWith('npm_')),
);
const sh = (cmd: string, args: string[], cwd: string, extra: NodeJS.ProcessEnv = {}) =>
  run(cmd, args, { cwd, env: { ...env, ...extra }, maxBuffer: 32 * 1024 * 1024, timeout: 240_000 });

/** The package's name and bin, as published (a scoped name: `crm-sync` is not on the registry). */
const manifest = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as {
  name: string;
  version: string;
  bin: Record<string, string>;
  publishConfig?: { access?: string };
};

/** The library example of docs/library.md (linked from the README), verbatim: the code block after the `library-example` marker. */
function libraryExample(): string {
  const readme = readFileSync(join(root, 'docs', 'library.md'), 'utf8');
  const match = /<!-- library-example -->\n```js\n([\s\S]*?)\n```/.exec(readme);
  if (!match?.[1]) throw new Error('docs/library.md has no library example block');
  return match[1];
}

// Removing the installed project (hundreds of packages) takes long on a loaded machine.
afterAll(async () => {
  const redis = new Redis(redisUrl, { lazyConnect: false });
  await deleteKeysWithPrefix(redis, prefix);
  redis.disconnect();
  rmSync(dir, { recursive: true, force: true });
}, 120_000);

describe('the npm package', () => {
  it('is named @crm-sync/cli, published public in one command, with the crm-sync command', () => {
    expect(manifest.name).toBe('@crm-sync/cli');
    // A scoped package is published restricted unless it says otherwise: `npm publish` alone must do.
    expect(manifest.publishConfig?.access).toBe('public');
    expect(manifest.bin).toEqual({ 'crm-sync': 'bin/crm-sync.js' });
    // The library example imports the package by the name it installs under.
    expect(libraryExample()).toContain(`from '${manifest.name}'`);
  });

  it(
    'packs (prepare builds unless dist/ is built from these sources), installs into a new project, and its docs/library.md example, types, schema and CLI work',
    { timeout: 480_000 },
    async () => {
      // `npm ci` ran prepare already (CI installs that way): when dist/ was built from these very
      // sources, building it again in pack costs 24 s of CPU here and shows nothing more. Any other
      // tree (no build, or sources changed since) is packed as a user's would be: prepare builds.
      const built = builtStamp(root);
      const skipBuild = built !== undefined && built === sourceStamp(root) ? ['--ignore-scripts'] : [];
      const packed = await sh('npm', ['pack', '--json', ...skipBuild, '--pack-destination', dir], root);
      const [info] = JSON.parse(packed.stdout.slice(packed.stdout.indexOf('['))) as Array<{
        filename: string;
        files: Array<{ path: string }>;
      }>;
      // npm's tarball name for a scoped package: scope and name joined by a dash.
      expect(info!.filename).toBe(`crm-sync-cli-${manifest.version}.tgz`);
      const files = info!.files.map((f) => f.path);
      for (const f of [
        'dist/index.js',
        'dist/index.d.ts',
        'dist/cli.js',
        // Read beside their loader at module load: without them nothing imports.
        'dist/redis/commands/record-results-8.lua',
        'dist/redis/commands/includes/run-status.lua',
        'bin/crm-sync.js',
        'schema/crm-sync.config.schema.json',
        'LICENSE',
        'README.md',
      ])
        expect(files).toContain(f);
      expect(files.filter((f) => /^(src|test|bench)\//.test(f))).toEqual([]);

      mkdirSync(project);
      writeFileSync(
        join(project, 'package.json'),
        JSON.stringify({ name: 'embeds-crm-sync', private: true, type: 'module' }),
      );
      // Every dependency is in npm's cache after `npm ci`; the registry is asked only for what is not.
      await sh(
        'npm',
        [
          'install',
          join(dir, info!.filename),
          '--prefer-offline',
          '--no-audit',
          '--no-fund',
          '--ignore-scripts',
          '--loglevel=error',
        ],
        project,
      );

      writeFileSync(join(project, 'example.mjs'), libraryExample());
      const example = await sh('node', ['example.mjs'], project, { REDIS_URL: redisUrl, CRM_SYNC_PREFIX: prefix });
      expect(example.stdout.trim()).toBe('completed 1 Renamed by crm-sync');

      const help = await sh('npx', ['--no-install', 'crm-sync', '--help'], project);
      expect(help.stdout).toContain('Usage: crm-sync');
      expect(help.stdout).toContain('import');

      const schema = await sh(
        'node',
        [
          '--input-type=module',
          '-e',
          `import s from '${manifest.name}/config.schema.json' with { type: 'json' }; console.log(s.title)`,
        ],
        project,
      );
      expect(schema.stdout.trim()).toBe('crm-sync configuration');

      // The declarations: a TypeScript consumer sees typed functions and stable error codes.
      writeFileSync(
        join(project, 'check.ts'),
        [
          `import { CrmSyncError, importFile, startWorkerPool, openRuntime, reconcileImport, type ErrorCode, type RunRecord } from '${manifest.name}';`,
          "const code: ErrorCode = new CrmSyncError('CONFIG_INVALID', 'x').code;",
          'const fns = [importFile, startWorkerPool, openRuntime, reconcileImport] as const;',
          'export const seen: [ErrorCode, number, RunRecord | undefined] = [code, fns.length, undefined];',
          '// @ts-expect-error: not an error code',
          "export const wrong: ErrorCode = 'NOT_A_CODE';",
        ].join('\n'),
      );
      const tsc = join(root, 'node_modules', 'typescript', 'bin', 'tsc');
      await sh(
        'node',
        [
          tsc,
          '--noEmit',
          '--strict',
          '--skipLibCheck',
          '--module',
          'nodenext',
          '--moduleResolution',
          'nodenext',
          '--target',
          'es2022',
          '--typeRoots',
          join(root, 'node_modules', '@types'),
          '--types',
          'node',
          'check.ts',
        ],
        project,
      );
    },
  );
});

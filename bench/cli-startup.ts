/**
 * How long the CLI takes to start: wall time of whole `node …` processes for help screens and
 * `runs list` (against the local Redis, under a private CRM_SYNC_PREFIX so it lists nothing of
 * anyone else's). The ways in: the bin as a user runs it (the bundle when dist/ is current, after
 * `npm run build`), the bin when src/ changed since the build (simulated by a stamp that does not
 * match, restored afterwards: the bin falls back to tsx), the bundle and dist/cli.js directly,
 * and the TypeScript through tsx without the bin. Prints the median, min and max of N runs and the load average;
 * nothing is asserted.
 *   npx tsx bench/cli-startup.ts [runs=9]
 */
import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { Redis } from 'ioredis';
import { deleteKeysWithPrefix } from '../src/runtime/index.js';

const RUNS = Number(process.argv[2] ?? 9);
const ROOT = new URL('..', import.meta.url).pathname;
const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const PREFIX = `crm-sync-bench-cli-${process.pid}`;

const built = spawnSync('npm', ['run', 'build', '--silent'], { cwd: ROOT, stdio: 'inherit' });
if (built.status !== 0) throw new Error('npm run build failed');

const COMMANDS: ReadonlyArray<readonly string[]> = [
  ['--help'],
  ['runs', '--help'],
  ['import', '--help'],
  ['worker', '--help'],
  ['runs', 'list'],
];
const WAYS: ReadonlyArray<{ name: string; args: readonly string[]; staleStamp?: boolean }> = [
  { name: 'bin/crm-sync.js', args: ['bin/crm-sync.js'] },
  { name: 'bin, src/ edited (tsx)', args: ['bin/crm-sync.js'], staleStamp: true },
  { name: 'dist/bundle/cli.js', args: ['dist/bundle/cli.js'] },
  { name: 'dist/cli.js (unbundled)', args: ['dist/cli.js'] },
  { name: 'tsx src/cli.ts', args: ['--import', 'tsx', 'src/cli.ts'] },
];

function once(args: readonly string[]): number {
  const started = process.hrtime.bigint();
  const r = spawnSync(process.execPath, args, {
    cwd: ROOT,
    env: { ...process.env, REDIS_URL, CRM_SYNC_PREFIX: PREFIX, CRM_SYNC_LOG_LEVEL: 'error' },
    encoding: 'utf8',
  });
  const ms = Number(process.hrtime.bigint() - started) / 1e6;
  if (r.status !== 0) throw new Error(`node ${args.join(' ')} exited ${r.status}: ${r.stderr}`);
  return ms;
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? (s[mid] ?? 0) : ((s[mid - 1] ?? 0) + (s[mid] ?? 0)) / 2;
};
const load = () =>
  loadavg()
    .map((l) => l.toFixed(2))
    .join(' ');

console.log(`node ${process.version}, ${RUNS} runs each, load average before: ${load()}`);
console.log('| command | way | median | min–max |');
console.log('|---|---|---|---|');
for (const command of COMMANDS) {
  for (const way of WAYS) {
    const stamp = `${ROOT}/dist/.build-stamp`;
    const built = readFileSync(stamp, 'utf8');
    if (way.staleStamp) writeFileSync(stamp, 'stale\n');
    const times: number[] = [];
    try {
      once([...way.args, ...command]); // warm the file cache
      for (let i = 0; i < RUNS; i++) times.push(once([...way.args, ...command]));
    } finally {
      writeFileSync(stamp, built);
    }
    console.log(
      `| \`${command.join(' ')}\` | ${way.name} | ${(median(times) / 1000).toFixed(3)} s | ${(Math.min(...times) / 1000).toFixed(3)}–${(Math.max(...times) / 1000).toFixed(3)} s |`,
    );
  }
}
console.log(`load average after: ${load()}`);

const redis = new Redis(REDIS_URL);
await deleteKeysWithPrefix(redis, PREFIX);
redis.disconnect();

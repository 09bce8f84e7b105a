/**
 * Peak memory of the dashboard while it takes a corrected-CSV upload (issue 20).
 *
 *   npx tsx bench/dashboard-upload.ts [sizes in MB, default 5,20,45]
 *
 * For each file a fresh `crm-sync dashboard` process (compiled dist/, as production runs it)
 * gets one upload over HTTP against a run with 3 failed rows; its peak resident set (VmHWM)
 * is read after the answer. Shapes:
 *   ignored  `crm_sync_row,x` then `x,1` lines: every line ignored (the issue's file)
 *   wide     export-shaped rows of ~100 KB each naming rows the run does not have (ignored
 *            after their values were read: the retry's 500-row chunk at its fattest)
 * BENCH_PARALLEL=2 sends each file that many times at once (the dashboard takes two at a time).
 */
import {
  createReadStream,
  mkdtempSync,
  openSync,
  closeSync,
  rmSync,
  statSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { RunStore } from '../src/runs/index.js';
import { deleteKeysWithPrefix } from '../src/runtime/index.js';
import { CLI, fmt, peakRssMb, startDashboardProcess } from './bench-lib.js';

const TOKEN = 'bench-dashboard-token-0123456789abcdef';
const MB = 1024 * 1024;
const sizes = (process.argv[2] ?? '5,20,45').split(',').map(Number);
const parallel = Math.max(1, Number(process.env.BENCH_PARALLEL ?? 1));
const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const dir = mkdtempSync(join(tmpdir(), 'crm-sync-bench-upload-'));
const prefix = `crm-sync-bench-upload-${Date.now().toString(36)}`;
const configPath = join(dir, 'crm-sync.config.json');
writeFileSync(
  configPath,
  JSON.stringify({
    redisUrl,
    workspaces: { acme: { baseUrl: 'http://acme.localhost:9/api/external', apiKeyEnv: 'BENCH_UNUSED_KEY' } },
  }),
);

/** Writes `bytes` of a file: the header, then `line(i)` until the size is reached. */
function writeFile(name: string, bytes: number, header: string, line: (i: number) => string): string {
  const path = join(dir, name);
  const fd = openSync(path, 'w');
  let size = Buffer.byteLength(header);
  writeSync(fd, header);
  let buffer = '';
  for (let i = 0; size < bytes; i++) {
    const l = line(i);
    size += Buffer.byteLength(l);
    buffer += l;
    if (buffer.length > MB) {
      writeSync(fd, buffer);
      buffer = '';
    }
  }
  writeSync(fd, buffer);
  closeSync(fd);
  return path;
}

/** Streams the file as multipart/form-data; resolves with status, answer size and time. */
function upload(
  port: number,
  runId: string,
  file: string,
): Promise<{ status: number; answerBytes: number; ms: number; ignored: number | null }> {
  const boundary = '----crmsyncbench';
  const head = Buffer.from(
    `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="corrected.csv"\r\nContent-Type: text/csv\r\n\r\n`,
  );
  const tail = Buffer.from(`\r\n--${boundary}--\r\n`);
  const length = head.length + statSync(file).size + tail.length;
  const t0 = performance.now();
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        method: 'POST',
        path: `/runs/${runId}/upload`,
        headers: {
          authorization: `Bearer ${TOKEN}`,
          accept: 'application/json',
          'content-type': `multipart/form-data; boundary=${boundary}`,
          'content-length': length,
        },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const body = Buffer.concat(chunks);
          let ignored: number | null = null;
          try {
            ignored = (JSON.parse(body.toString()) as { ignoredCount?: number }).ignoredCount ?? null;
          } catch {
            // not JSON: reported by its status
          }
          resolve({ status: res.statusCode ?? 0, answerBytes: body.length, ms: performance.now() - t0, ignored });
        });
      },
    );
    req.on('error', reject);
    req.write(head);
    const stream = createReadStream(file);
    stream.on('end', () => req.end(tail));
    stream.pipe(req, { end: false });
  });
}

const redis = new Redis(redisUrl);
const store = new RunStore({ redis, prefix });
const run = await store.createRun({
  workspace: 'acme',
  operation: 'deal.update',
  source: 'bench.csv',
  columns: ['id', 'name', 'note'],
});
await store.addQueued(run.id, 3);
const at = new Date().toISOString();
await store.recordResults(
  run.id,
  [1, 2, 3].map((row) => ({
    row,
    line: row + 1,
    status: 'failed' as const,
    code: 'CRM_REJECTED' as const,
    httpStatus: 422,
    message: 'unknown stage',
    original: { id: `d${row}`, name: 'x', note: '' },
    at,
  })),
);
await store.finishProducing(run.id);

const wide = 'w'.repeat(100 * 1024);
const shapes: Array<{ name: string; make: (mb: number) => string }> = [
  { name: 'ignored', make: (mb) => writeFile(`ignored-${mb}.csv`, mb * MB, 'crm_sync_row,x\n', () => 'x,1\n') },
];
if (sizes.includes(45)) {
  shapes.push({
    name: 'wide',
    make: (mb) =>
      writeFile(
        `wide-${mb}.csv`,
        mb * MB,
        'crm_sync_run_id,crm_sync_row,id,name,note\n',
        (i) => `${run.id},${1_000_000 + i},d${i},Deal ${i},${wide}\n`,
      ),
  });
}

console.log(`dashboard upload memory (${CLI}, Node ${process.version}); peak RSS = VmHWM of the dashboard process`);
console.log('| file | size | answer | time | ignored lines | RSS before | peak RSS |');
console.log('|---|---|---|---|---|---|---|');
try {
  for (const shape of shapes) {
    for (const mb of shape.name === 'wide' ? [45] : sizes) {
      const file = shape.make(mb);
      const dash = await startDashboardProcess({ configPath, prefix, token: TOKEN });
      const before = peakRssMb(dash.pid);
      const all = await Promise.all(Array.from({ length: parallel }, () => upload(dash.port, run.id, file)));
      const res = all[0]!;
      const peak = peakRssMb(dash.pid);
      await dash.stop();
      rmSync(file, { force: true });
      console.log(
        `| ${shape.name}${parallel > 1 ? ` ×${parallel} at once (${all.map((a) => a.status).join(', ')})` : ''} | ${mb} MB | ${res.status}, ${fmt(res.answerBytes / 1024)} KB | ${fmt(res.ms / 1000, 2)} s | ${res.ignored?.toLocaleString('en-US') ?? '–'} | ${fmt(before)} MB | **${fmt(peak)} MB** |`,
      );
    }
  }
} finally {
  await deleteKeysWithPrefix(redis, prefix);
  redis.disconnect();
  rmSync(dir, { recursive: true, force: true });
}

import { randomBytes } from 'node:crypto';
import { createWriteStream, mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { finished } from 'node:stream/promises';
import { fileURLToPath } from 'node:url';
import { configFromObject, DEFAULTS, getWorkspace } from '../config/index.js';
import type { Operation } from '../crm/index.js';
import { readMappingFile } from '../ingest/index.js';
import type { Logger } from '../log/index.js';
import { importFile } from '../lifecycle/index.js';
import {
  FINAL_ROW_STATUSES,
  runWhenDone,
  writeResultsCsv,
  type FinalRowStatus,
  type RunCounts,
  type RunRecord,
} from '../runs/index.js';
import { redactRedisUrl } from '../redis/index.js';
import { findOrStartRedis, openRuntime } from '../runtime/index.js';
import { startSimulator } from '../sim/index.js';
import { startWorkerPool } from '../worker/index.js';

export const SAMPLES_DIR = resolve(fileURLToPath(new URL('../../samples', import.meta.url)));
/** The simulator data the sample files were written against (`samples/make-samples.ts`). */
export const SAMPLE_SEED = 7;
export const SAMPLE_RECORDS = 200;

export interface DemoImport {
  file: string;
  op: Operation;
  mapping?: string;
  what: string;
}

export const DEMO_IMPORTS: readonly DemoImport[] = [
  {
    file: 'deals-update.csv',
    op: 'deal.update',
    mapping: 'deals-mapping.json',
    what: 'deal updates from a spreadsheet export, with a column mapping',
  },
  { file: 'deals-create.csv', op: 'deal.create', what: 'new deals' },
  { file: 'contacts-update.ndjson', op: 'contact.update', what: 'contact updates (NDJSON)' },
  { file: 'leads-update.json', op: 'lead.update', what: 'lead status changes (JSON array)' },
  { file: 'team-invite.csv', op: 'team.invite', what: 'team invitations, batched' },
];

export interface DemoOptions {
  logger: Logger;
  /** Where failed-row CSVs go. Default ./crm-sync-results. */
  resultsDir?: string;
  /** Write progress lines here. Default stdout. */
  out?: NodeJS.WritableStream;
  /** Redis key prefix. Default `crm-sync-demo` (apart from real runs). */
  prefix?: string;
}

export interface DemoResult {
  runs: Array<{ run: RunRecord; failedCsv: string | null; what: string }>;
  redisUrl: string;
}

/**
 * The whole product on embedded defaults: the CRM simulator in-process (rate-limited, with a
 * few 5xx), a local Redis (or a private redis-server), workers, and the sample files imported
 * one after another. Failed rows (there are some, on purpose) are exported as CSV.
 */
export async function runDemo(options: DemoOptions): Promise<DemoResult> {
  const out = options.out ?? process.stdout;
  const say = (line: string) => out.write(`${line}\n`);
  const { url: redisUrl, started } = await findOrStartRedis();
  say(`Redis: ${started ? `started a private redis-server at ${redisUrl}` : redactRedisUrl(redisUrl)}`);
  const apiKey = `demo-${randomBytes(8).toString('hex')}`;
  const sim = await startSimulator({
    port: 0,
    workspaces: [
      {
        name: 'acme',
        apiKeys: [apiKey],
        records: SAMPLE_RECORDS,
        seed: SAMPLE_SEED,
        rateLimit: { max: 40, windowMs: 1000 },
      },
    ],
    latencyMs: 10,
    faults: { errorRate: 0.03 },
  });
  // The simulated CRM refuses disposable addresses, so one invite batch is rejected and bisected.
  sim.workspace('acme').blockEmailDomain('disposable.example');
  say(`CRM simulator: ${sim.baseUrl('acme')} (40 requests/s, 3% 5xx answers)`);
  process.env.CRM_SYNC_DEMO_API_KEY = apiKey;
  const resultsDir = resolve(options.resultsDir ?? DEFAULTS.config.resultsDir);
  const config = configFromObject(
    {
      redisUrl,
      resultsDir,
      workspaces: {
        acme: {
          baseUrl: sim.baseUrl('acme'),
          apiKeyEnv: 'CRM_SYNC_DEMO_API_KEY',
          rateLimit: { max: 35, durationMs: 1000 },
          retry: { attempts: 5, backoffMs: 200 },
          // The in-process simulator answers in milliseconds: a create whose answer was a 5xx is
          // looked up after 2 s, not production's 30 s (a late-delivered request is not a risk here).
          createSettleMs: 2000,
        },
      },
    },
    { source: 'demo', env: { ...process.env, CRM_SYNC_PREFIX: options.prefix ?? 'crm-sync-demo' } },
  );
  const runtime = await openRuntime(config, options.logger);
  const pool = await startWorkerPool({
    config,
    logger: options.logger,
    concurrency: DEFAULTS.worker.concurrency,
    // The demo's own: it stops within seconds.
    closeTimeoutMs: 5000,
  });
  const result: DemoResult = { runs: [], redisUrl };
  try {
    for (const item of DEMO_IMPORTS) {
      const file = join(SAMPLES_DIR, item.file);
      const { run } = await importFile({
        file,
        op: item.op,
        workspace: 'acme',
        queue: runtime.queue('acme'),
        store: runtime.store,
        inviteBatchSize: 10,
        rowsPerJob: getWorkspace(config, 'acme').rowsPerJob,
        ...(item.mapping ? { mapping: readMappingFile(join(SAMPLES_DIR, item.mapping)) } : {}),
        logger: options.logger,
      });
      const final = await runWhenDone(runtime.store, run.id, { everyMs: 200 });
      let failedCsv: string | null = null;
      if (final.counts.failed + final.counts.invalid > 0) {
        mkdirSync(resultsDir, { recursive: true });
        failedCsv = join(resultsDir, `${final.id}-failed.csv`);
        const stream = createWriteStream(failedCsv);
        await writeResultsCsv(runtime.store, final.id, stream, { problemsOnly: true });
        stream.end();
        await finished(stream);
      }
      const c = final.counts;
      say(
        `${item.file.padEnd(24)} ${item.op.padEnd(15)} ${String(c.total).padStart(3)} rows: ${kindWords(c)}  (${item.what})`,
      );
      result.runs.push({ run: final, failedCsv, what: item.what });
    }
    const s = sim.workspace('acme').stats;
    say(`CRM saw ${s.requests} requests: ${s.rateLimited} answered 429, ${s.errors5xx} answered 5xx (retried).`);
    for (const r of result.runs) if (r.failedCsv) say(`failed rows of ${r.run.id}: ${r.failedCsv}`);
    say(
      `The demo's runs stay in Redis: CRM_SYNC_PREFIX=${options.prefix ?? 'crm-sync-demo'} npx crm-sync runs show <run id>`,
    );
    say(
      'Fix a failed-rows CSV and retry it with: crm-sync runs retry <run id> --file <csv>  (against a real workspace).',
    );
  } finally {
    await pool.close();
    await runtime.close();
    await sim.close();
    await started?.stop();
  }
  return result;
}

/**
 * `36 succeeded, 2 failed, 2 invalid`, and any other result kind of the run store the run has
 * (unchanged, uncertain, superseded, cancelled): the summary leaves no row out.
 */
export function kindWords(c: RunCounts): string {
  const always = new Set<FinalRowStatus>(['succeeded', 'failed', 'invalid']);
  return FINAL_ROW_STATUSES.filter((k) => always.has(k) || c[k] > 0)
    .map((k) => `${c[k]} ${k === 'skipped' ? 'unchanged' : k}`)
    .join(', ');
}

import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { runDemo } from '../../src/demo/index.js';
import { silentLogger } from '../../src/log/index.js';
import { deleteKeysWithPrefix, redisAnswers } from '../../src/runtime/index.js';

const prefix = `crm-sync-demo-test-${process.pid}`;
const dir = mkdtempSync(join(tmpdir(), 'crm-sync-demo-'));

let redisUrl: string | undefined;

afterAll(async () => {
  // The demo may have used a private redis-server (already stopped): clean where it ran.
  if (redisUrl && (await redisAnswers(redisUrl))) {
    const redis = new Redis(redisUrl);
    await deleteKeysWithPrefix(redis, prefix);
    redis.disconnect();
  }
  delete process.env.CRM_SYNC_DEMO_API_KEY;
  rmSync(dir, { recursive: true, force: true });
});

describe('npm run demo', () => {
  it('imports every sample file with the documented outcomes and writes the failed rows', async () => {
    const out = new PassThrough();
    let text = '';
    out.on('data', (d: Buffer) => (text += d.toString()));
    const result = await runDemo({ logger: silentLogger, resultsDir: dir, out, prefix });
    redisUrl = result.redisUrl;
    const byFile = Object.fromEntries(result.runs.map((r) => [r.run.source.split('/').pop(), r.run.counts]));
    expect(byFile['deals-update.csv']).toMatchObject({ total: 40, succeeded: 36, failed: 2, invalid: 2, queued: 0 });
    expect(byFile['deals-create.csv']).toMatchObject({ total: 11, succeeded: 10, invalid: 1 });
    expect(byFile['contacts-update.ndjson']).toMatchObject({ total: 26, succeeded: 24, failed: 1, invalid: 1 });
    expect(byFile['leads-update.json']).toMatchObject({ total: 15, succeeded: 14, invalid: 1 });
    expect(byFile['team-invite.csv']).toMatchObject({ total: 30, succeeded: 27, failed: 2, invalid: 1 });
    expect(result.runs.every((r) => r.run.status === 'completed')).toBe(true);
    const invites = result.runs.find((r) => r.run.operation === 'team.invite')!;
    const csv = readFileSync(invites.failedCsv!, 'utf8');
    expect(csv).toContain('temp.worker@disposable.example (domain not allowed)');
    expect(csv).toContain('new.hire28@@acme-corp.example');
    expect(text).toContain('deals-update.csv');
    expect(text).not.toMatch(/demo-[0-9a-f]{16}/); // the simulator's key is never printed
  }, 60_000);
});

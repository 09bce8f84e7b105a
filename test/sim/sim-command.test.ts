import { once } from 'node:events';
import { describe, expect, it } from 'vitest';
import { parseRateLimit } from '../../src/sim/index.js';
import { httpRequest } from '../helpers/http.js';
import { startSimProcess } from '../helpers/sim-process.js';

describe('parseRateLimit', () => {
  it.each([
    ['50/s', { max: 50, windowMs: 1000 }],
    ['100/10s', { max: 100, windowMs: 10_000 }],
    ['3000/min', { max: 3000, windowMs: 60_000 }],
    ['5/250ms', { max: 5, windowMs: 250 }],
    ['10/h', { max: 10, windowMs: 3_600_000 }],
  ])('%s', (text, expected) => {
    expect(parseRateLimit(text)).toEqual(expected);
  });

  it.each(['50', '0/s', '5/0s', 'x/s', '5/fortnight', ''])('refuses %j', (text) => {
    expect(() => parseRateLimit(text)).toThrow(/not like 50\/s/);
  });
});

describe('crm-sync sim', () => {
  it('prints base_urls and a curl example, serves seeded data, stops cleanly on SIGTERM', async () => {
    const { child, out, port } = await startSimProcess([
      '--workspace',
      'acme:K1',
      '--workspace',
      'globex:K2',
      '--records',
      '12',
      '--seed',
      '7',
      '--rate',
      '100/s',
    ]);
    try {
      expect(out).toContain(`base_url http://acme.localhost:${port}/api/external`);
      expect(out).toContain(`base_url http://globex.localhost:${port}/api/external`);
      expect(out).toContain(
        `curl -H 'X-Api-Key: K1' 'http://acme.localhost:${port}/api/external/v2/contacts?page_size=5'`,
      );
      const res = await httpRequest({
        port,
        host: `globex.localhost:${port}`,
        path: '/api/external/v2/deals?page_size=5',
        headers: { 'x-api-key': 'K2' },
      });
      expect(res.status).toBe(200);
      expect((res.json as { pagination: { total_records: number } }).pagination.total_records).toBe(12);
      const wrong = await httpRequest({
        port,
        host: `globex.localhost:${port}`,
        path: '/api/external/v2/deals',
        headers: { 'x-api-key': 'K1' },
      });
      expect(wrong.status).toBe(401);
    } finally {
      child.kill('SIGTERM');
    }
    const [code] = (await once(child, 'exit')) as [number | null];
    expect(code).toBe(0);
  });
});

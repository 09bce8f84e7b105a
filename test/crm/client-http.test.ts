import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { inspect } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Secret } from '../../src/config/index.js';
import {
  BadResponseError,
  CrmClient,
  type CrmError,
  RejectedError,
  TransientError,
  isLoopbackName,
} from '../../src/crm/index.js';
import { captureLogger } from '../helpers/log-capture.js';
import { leadRecord, ts } from './fixtures.js';

/**
 * The client against a tiny real HTTP server whose answers the test chooses: the malformed
 * and hostile cases a spec-faithful simulator would never produce.
 */

const KEY = 'k-test-9f8e7d6c5b4a';
const deal = {
  id: 'd/1 x',
  name: 'n',
  status: 'won',
  value: 1,
  currency: 'EUR',
  price: '€1.00',
  unique_number: 'D-1',
  contact: null,
  company: null,
  owner: null,
  pipeline: null,
  stage: null,
  tags: [],
  created_at: ts,
  updated_at: ts,
};

const lead = leadRecord;

interface Seen {
  method: string;
  url: string;
  host: string | undefined;
  apiKey: string | undefined;
  accept: string | undefined;
  contentType: string | undefined;
  body: string;
}

type Handler = (req: IncomingMessage, res: ServerResponse, body: string) => void;

let server: Server;
let port: number;
let handler: Handler = (_req, res) => res.end();
const seen: Seen[] = [];

beforeAll(async () => {
  server = createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (c: string) => (body += c));
    req.on('end', () => {
      seen.push({
        method: req.method ?? '',
        url: req.url ?? '',
        host: req.headers.host,
        apiKey: req.headers['x-api-key'] as string | undefined,
        accept: req.headers.accept,
        contentType: req.headers['content-type'],
        body,
      });
      handler(req, res, body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as AddressInfo).port;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

function client(overrides: Partial<ConstructorParameters<typeof CrmClient>[0]> = {}): CrmClient {
  return new CrmClient({
    workspace: 'acme',
    baseUrl: `http://acme.localhost:${port}/api/external`,
    apiKey: new Secret(KEY),
    ...overrides,
  });
}

function json(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
}

function expectNoKey(value: unknown): void {
  expect(inspect(value, { depth: 20, showHidden: true })).not.toContain(KEY);
  expect(JSON.stringify(value) ?? '').not.toContain(KEY);
  if (value instanceof Error) expect(value.stack ?? '').not.toContain(KEY);
}

describe('CrmClient over real HTTP', () => {
  it('names *.localhost loopback itself', () => {
    expect(isLoopbackName('acme.localhost')).toBe(true);
    expect(isLoopbackName('LOCALHOST.')).toBe(true);
    expect(isLoopbackName('localhost.example.com')).toBe(false);
  });

  it('sends the key, JSON headers, the wrapper body and an encoded id to the *.localhost host', async () => {
    seen.length = 0;
    handler = (_req, res) => json(res, 200, { deal });
    const c = client();
    try {
      const got = await c.updateDeal('d/1 x', { name: 'n', value: 1 });
      expect(got.id).toBe('d/1 x');
    } finally {
      c.close();
    }
    expect(seen).toHaveLength(1);
    const req = seen[0]!;
    expect(req.method).toBe('PATCH');
    expect(req.url).toBe('/api/external/v2/deals/d%2F1%20x');
    expect(req.host).toBe(`acme.localhost:${port}`);
    expect(req.apiKey).toBe(KEY);
    expect(req.accept).toBe('application/json');
    expect(req.contentType).toContain('application/json');
    expect(JSON.parse(req.body)).toEqual({ deal: { name: 'n', value: 1 } });
  });

  it('a 2xx body that is not JSON → BadResponseError', async () => {
    handler = (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/html' });
      res.end('<html>maintenance</html>');
    };
    const c = client();
    try {
      const err = await c.updateLead('l1', { name: 'x' }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(BadResponseError);
      expect((err as BadResponseError).message).toContain('not JSON');
      expect((err as BadResponseError).message).not.toContain('maintenance');
      expect((err as BadResponseError).recordId).toBeUndefined();
      expectNoKey(err);
    } finally {
      c.close();
    }
  });

  it('a 2xx body that misses schema fields → BadResponseError naming the path', async () => {
    handler = (_req, res) => json(res, 200, { contact: { id: 'c1', name: 'Hidden Person', email: 5 } });
    const c = client();
    try {
      const err = await c.updateContact('c1', { name: 'x' }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(BadResponseError);
      expect((err as BadResponseError).message).toContain('contact.email');
      expect((err as BadResponseError).message).not.toContain('Hidden Person');
      expect((err as BadResponseError).status).toBe(200);
      // The write was applied: the error still names the record so the row is not failed.
      expect((err as BadResponseError).recordId).toBe('c1');
    } finally {
      c.close();
    }
  });

  it('a list page that ignores page_number is refused rather than paged forever', async () => {
    const pagination = { total_records: 1, current_page_number: 1, total_pages: 1, page_size: 10 };
    handler = (_req, res) => json(res, 200, { deals: [deal], pagination });
    const c = client();
    try {
      const err = await c.listPage('deals', { pageNumber: 2, pageSize: 10 }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(BadResponseError);
      expect(seen.at(-1)?.url).toBe('/api/external/v2/deals?page_number=2&page_size=10');
    } finally {
      c.close();
    }
  });

  it('the pager yields a record once when it moves onto the next page, and stops at the page its answer calls the last when it is short', async () => {
    seen.length = 0;
    const byPage: Record<string, string[]> = { '1': ['a', 'b'], '2': ['b', 'c'], '3': ['d'] };
    handler = (req, res) => {
      const url = new URL(req.url ?? '/', 'http://x');
      const n = url.searchParams.get('page_number') ?? '1';
      const ids = byPage[n] ?? [];
      const pagination = { total_records: 4, current_page_number: Number(n), total_pages: 3, page_size: 2 };
      json(res, 200, { leads: ids.map((id) => ({ ...lead, id })), pagination });
    };
    const c = client();
    try {
      const ids: string[] = [];
      for await (const r of c.records('leads', { pageSize: 2, version: 'v1' })) ids.push(r.id);
      expect(ids).toEqual(['a', 'b', 'c', 'd']);
    } finally {
      c.close();
    }
    expect(seen.map((s) => s.url)).toEqual([1, 2, 3].map((n) => `/api/external/v1/leads?page_number=${n}&page_size=2`));
  });

  it('the pager follows a list that grows while it reads (each answer counts its pages), and an empty page ends one that counted too many', async () => {
    seen.length = 0;
    // Pages of 2: 4 records when page 1 is read, 5 by page 2 (a third page), and page 3's
    // answer counts a fourth page that is not there.
    const byPage: Record<string, { ids: string[]; total: number }> = {
      '1': { ids: ['a', 'b'], total: 2 },
      '2': { ids: ['c', 'd'], total: 3 },
      '3': { ids: ['e'], total: 4 },
    };
    handler = (req, res) => {
      const url = new URL(req.url ?? '/', 'http://x');
      const n = url.searchParams.get('page_number') ?? '1';
      const { ids, total } = byPage[n] ?? { ids: [], total: 4 };
      const pagination = { total_records: total * 2, current_page_number: Number(n), total_pages: total, page_size: 2 };
      json(res, 200, { leads: ids.map((id) => ({ ...lead, id })), pagination });
    };
    const c = client();
    try {
      const ids: string[] = [];
      for await (const r of c.records('leads', { pageSize: 2, version: 'v1' })) ids.push(r.id);
      expect(ids).toEqual(['a', 'b', 'c', 'd', 'e']);
    } finally {
      c.close();
    }
    expect(seen.map((s) => s.url)).toEqual(
      [1, 2, 3, 4].map((n) => `/api/external/v1/leads?page_number=${n}&page_size=2`),
    );
  });

  it('a full page at the count is followed to an empty page: a total_pages that is short (issue 43) loses no record', async () => {
    seen.length = 0;
    // Every answer says 1 page, yet pages 1-3 are full and page 4 is empty.
    const byPage: Record<string, string[]> = { '1': ['a', 'b'], '2': ['c', 'd'], '3': ['e', 'f'] };
    handler = (req, res) => {
      const n = new URL(req.url ?? '/', 'http://x').searchParams.get('page_number') ?? '1';
      const ids = byPage[n] ?? [];
      const pagination = { total_records: 2, current_page_number: Number(n), total_pages: 1, page_size: 2 };
      json(res, 200, { leads: ids.map((id) => ({ ...lead, id })), pagination });
    };
    const c = client();
    try {
      const ids: string[] = [];
      for await (const r of c.records('leads', { pageSize: 2, version: 'v1' })) ids.push(r.id);
      expect(ids).toEqual(['a', 'b', 'c', 'd', 'e', 'f']);
    } finally {
      c.close();
    }
    expect(seen.map((s) => s.url)).toEqual(
      [1, 2, 3, 4].map((n) => `/api/external/v1/leads?page_number=${n}&page_size=2`),
    );
  });

  it('a list that repeats its page for ever while claiming 1,000,000 pages ends at the first page with nothing new, with a warning naming it', async () => {
    seen.length = 0;
    handler = (req, res) => {
      const n = Number(new URL(req.url ?? '/', 'http://x').searchParams.get('page_number') ?? '1');
      const pagination = { total_records: 2_000_000, current_page_number: n, total_pages: 1_000_000, page_size: 2 };
      json(res, 200, { leads: ['a', 'b'].map((id) => ({ ...lead, id })), pagination });
    };
    const { logger, lines } = captureLogger('warn');
    const c = client({ logger });
    try {
      const ids: string[] = [];
      for await (const r of c.records('leads', { pageSize: 2, version: 'v1' })) ids.push(r.id);
      expect(ids).toEqual(['a', 'b']);
    } finally {
      c.close();
    }
    expect(seen).toHaveLength(2);
    const warned = lines.filter((l) => l.level === 40);
    expect(warned).toHaveLength(1);
    expect(warned[0]).toMatchObject({ list: 'v1/leads', page: 2 });
    expect(warned[0]!.msg).toMatch(/page 2 brought no record not seen before/);
  });

  it('full pages of new records past the count end after maxPagesPastCount, with a warning', async () => {
    seen.length = 0;
    handler = (req, res) => {
      const n = Number(new URL(req.url ?? '/', 'http://x').searchParams.get('page_number') ?? '1');
      const pagination = { total_records: 2, current_page_number: n, total_pages: 1, page_size: 2 };
      json(res, 200, { leads: [`a${n}`, `b${n}`].map((id) => ({ ...lead, id })), pagination });
    };
    const { logger, lines } = captureLogger('warn');
    const c = client({ logger });
    try {
      let n = 0;
      for await (const r of c.records('leads', { pageSize: 2, version: 'v1', maxPagesPastCount: 3 })) n += r ? 1 : 0;
      expect(n).toBe(8);
    } finally {
      c.close();
    }
    expect(seen).toHaveLength(4);
    expect(lines.filter((l) => l.level === 40).map((l) => l.page)).toEqual([4]);
  });

  it("an update whose answer names another record is a CRM fault, never that record's id (issue 43)", async () => {
    seen.length = 0;
    handler = (_req, res) => json(res, 200, { deal: { ...deal, id: 'd-1010' } });
    const c = client();
    try {
      const err = await c.update({ op: 'deal.update', id: 'd/1 x', fields: { name: 'n' } }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(BadResponseError);
      expect((err as BadResponseError).answeredId).toBe('d-1010');
      expect((err as BadResponseError).recordId).toBeUndefined();
      expect((err as BadResponseError).message).toMatch(/names record "d-1010", not "d\/1 x"/);
      // The CRM's id goes into the path escaped, whatever it holds.
      expect(seen.at(-1)?.url).toBe('/api/external/v2/deals/d%2F1%20x');
      handler = (_req, res) => json(res, 200, { deal });
      expect(await c.update({ op: 'deal.update', id: 'd/1 x', fields: { name: 'n' } })).toBe('d/1 x');
    } finally {
      c.close();
    }
  });

  it('never retries a POST itself: one 503 is one request', async () => {
    seen.length = 0;
    handler = (_req, res) => json(res, 503, { error: 'busy' });
    const c = client();
    try {
      const err = await c.createDeal({ name: 'x' }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(TransientError);
      expect((err as TransientError).serviceMessage).toBe('busy');
      expect(seen).toHaveLength(1);
    } finally {
      c.close();
    }
  });

  it('a dropped connection → TransientError; a service echoing the key → key scrubbed', async () => {
    handler = (req, res) => {
      if (req.url?.includes('team-members')) json(res, 422, { error: `bad key ${KEY} and emails` });
      else req.socket.destroy();
    };
    const c = client();
    try {
      const dropped = await c.createDeal({ name: 'x' }).catch((e: unknown) => e);
      expect(dropped).toBeInstanceOf(TransientError);
      expect((dropped as TransientError).maybeCommitted).toBe(true);
      expectNoKey(dropped);
      const echoed = await c.addTeamMembers({ emails: ['a@b.co'] }).catch((e: unknown) => e);
      expect(echoed).toBeInstanceOf(RejectedError);
      expect((echoed as RejectedError).serviceMessage).toContain('[redacted]');
      expectNoKey(echoed);
    } finally {
      c.close();
    }
  });

  it('a refused connection → TransientError that was never committed', async () => {
    const probe = createServer();
    await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
    const freePort = (probe.address() as AddressInfo).port;
    await new Promise<void>((resolve) => probe.close(() => resolve()));
    const c = client({ baseUrl: `http://localhost:${freePort}/api/external` });
    try {
      const err = await c.createDeal({ name: 'x' }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(TransientError);
      expect((err as CrmError).message).toContain('ECONNREFUSED');
      expect((err as TransientError).maybeCommitted).toBe(false);
    } finally {
      c.close();
    }
  });

  it('util.inspect / JSON of the client do not show the key', () => {
    const c = client();
    try {
      expectNoKey(c);
      expect(inspect(c)).toContain('acme');
    } finally {
      c.close();
    }
  });
});

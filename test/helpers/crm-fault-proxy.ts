import { createServer, request, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';

/**
 * An HTTP fault-injection proxy in front of the CRM simulator, for tests that must show what the
 * client does when the network or the CRM misbehaves on one precise request (late delivery, lost
 * answer, rewritten body, skewed clock). node:http only. The Host header is forwarded unchanged
 * because it names the simulator workspace (`acme.localhost:<port>`).
 */

/** Exactly one behaviour per rule. */
export type FaultAction =
  /** Wait `ms` before forwarding; forwarded and applied even if the client gave up meanwhile. */
  | { holdRequest: number }
  /** Forward at once, hold the upstream answer `ms`, then send it (dropped if the client is gone). */
  | { holdAnswer: number }
  /** Answer 502 `{"error":"bad gateway"}` without forwarding (nothing applied). */
  | { fail502: true }
  /** Forward, wait for the upstream answer, then destroy the client socket without answering. */
  | { applyAndDrop: true }
  /** Replace the JSON request body before forwarding (Content-Length recomputed). */
  | { rewriteBody: (json: unknown) => unknown }
  /**
   * Forward, then replace the JSON answer before the client gets it (a CRM no one here wrote:
   * another record's id, a taken id, a page repeated, a count that is off). `query` is the
   * request's search parameters; the status stays the upstream's.
   */
  | { rewriteAnswer: (json: unknown, request: { method: string; path: string; query: URLSearchParams }) => unknown };

export type FaultRule = FaultAction & {
  /** Default: any method. Compared case-insensitively. */
  method?: string;
  /** Tested against the URL path without query, e.g. `/api/external/v2/deals` (no /g flag: test() would keep state). Default: any path. */
  path?: RegExp;
  /** How many requests the rule applies to. Default: unlimited. */
  times?: number;
  /** Also rewrite the JSON request body before the action (e.g. automation, then a dropped answer). Default none. */
  rewrite?: (json: unknown) => unknown;
  /** Also wait this long before forwarding (network latency of this request), then the action. Default 0. */
  delayMs?: number;
};

/**
 * `answered`: the client got the (possibly late) answer; `fail502`: the proxy answered 502;
 * `dropped`: applyAndDrop cut the answer; `client-gone`: forwarded, but the client had given up
 * before its answer could be sent; `upstream-error`: the upstream failed (client socket destroyed);
 * `cancelled`: never forwarded (close() came during a hold, or rewriteBody threw); `pending`: in flight.
 */
export type RequestOutcome =
  'pending' | 'answered' | 'fail502' | 'dropped' | 'client-gone' | 'upstream-error' | 'cancelled';

export interface ProxiedRequest {
  method: string;
  /** URL path without query. */
  path: string;
  /**
   * Date.now() when the request's head arrived, before its body is read: when a CRM counts it
   * against a rate limit. Windows of sends are counted from this (forwardedAt adds the proxy's
   * own reading of the body, which a loaded test process stretches).
   */
  arrivedAt: number;
  /** Date.now() when the request was sent upstream; null when it never was. */
  forwardedAt: number | null;
  outcome: RequestOutcome;
}

export interface CrmFaultProxyOptions {
  /** The simulator's port (`sim.port`). */
  upstreamPort: number;
  /** Default 127.0.0.1. */
  upstreamHost?: string;
  /** Initial rules, evaluated in order; the first that matches and has `times` left applies. Default none. */
  rules?: FaultRule[];
  /** Initial clock skew of every answer, in ms (negative = the CRM is behind). Default 0. */
  skewClockMs?: number;
}

export interface CrmFaultProxy {
  readonly port: number;
  /** `http://<workspace>.localhost:<proxy port>/api/external`, for CrmClient's baseUrl. */
  baseUrl(workspace: string): string;
  /** Replaces the rule list (each rule's `times` counts from now). */
  setRules(rules: FaultRule[]): void;
  /** Shifts the `Date` header and every `created_at`/`updated_at` of every answer by `ms`. */
  skewClockMs: number;
  /** Shifts only `created_at`/`updated_at` by `ms` on top (a CRM whose records are stamped by another clock). */
  skewRecordsMs: number;
  /** False: answers carry no `Date` header (the client has no clock signal from it). Default true. */
  dateHeader: boolean;
  /** Every request seen, in arrival order. */
  readonly requests: readonly ProxiedRequest[];
  /** Requests forwarded upstream that match `method` (default any) and `path` (default any). */
  count(method?: string, path?: RegExp): number;
  /**
   * Applications still owed by rules with a `times` (0 once every counted rule fired as often as
   * it said): a test checks it so a fault that never happened cannot pass for one that was survived.
   */
  unspent(): number;
  /** Stops listening, cuts client sockets and cancels holds still waiting. */
  close(): Promise<void>;
}

const ACTIONS = ['holdRequest', 'holdAnswer', 'fail502', 'applyAndDrop', 'rewriteBody', 'rewriteAnswer'] as const;
/** Hop-by-hop headers (RFC 9110 §7.6.1) and the length, which the proxy sets itself. */
const HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'transfer-encoding',
  'te',
  'trailer',
  'upgrade',
  'content-length',
]);

interface LiveRule {
  rule: FaultRule;
  left: number;
}

function endToEnd(headers: IncomingHttpHeaders, body: Buffer): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(headers)) if (value !== undefined && !HOP.has(name)) out[name] = value;
  out['content-length'] = String(body.length);
  return out;
}

function readBody(stream: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    stream.on('data', (c: Buffer) => chunks.push(c));
    stream.on('end', () => resolve(Buffer.concat(chunks)));
    stream.on('error', reject);
  });
}

/** Shifts every `created_at`/`updated_at` string that parses as a date; other values stay. */
function shiftTimestamps(value: unknown, ms: number): unknown {
  if (Array.isArray(value)) return value.map((v) => shiftTimestamps(v, ms));
  if (typeof value !== 'object' || value === null) return value;
  const out: Record<string, unknown> = {};
  for (const [key, v] of Object.entries(value)) {
    const at = typeof v === 'string' && (key === 'created_at' || key === 'updated_at') ? Date.parse(v) : NaN;
    out[key] = Number.isNaN(at) ? shiftTimestamps(v, ms) : new Date(at + ms).toISOString();
  }
  return out;
}

export async function startCrmFaultProxy(options: CrmFaultProxyOptions): Promise<CrmFaultProxy> {
  const upstreamHost = options.upstreamHost ?? '127.0.0.1';
  const requests: ProxiedRequest[] = [];
  const holds = new AbortController();
  let rules: LiveRule[] = [];
  const setRules = (list: FaultRule[]): void => {
    for (const rule of list) {
      const actions = ACTIONS.filter((a) => a in rule);
      if (actions.length !== 1)
        throw new Error(
          `crm fault proxy: a rule needs exactly one of ${ACTIONS.join(', ')}; got ${actions.join(', ') || 'none'}`,
        );
    }
    rules = list.map((rule) => ({ rule, left: rule.times ?? Infinity }));
  };
  setRules(options.rules ?? []);

  const take = (method: string, path: string): FaultRule | undefined => {
    const live = rules.find(
      ({ rule, left }) =>
        left > 0 &&
        (rule.method === undefined || rule.method.toUpperCase() === method) &&
        (rule.path?.test(path) ?? true),
    );
    if (live) live.left--;
    return live?.rule;
  };

  /** One upstream exchange; resolves with the raw answer. */
  const forward = (
    req: IncomingMessage,
    body: Buffer,
  ): Promise<{ status: number; headers: IncomingHttpHeaders; body: Buffer }> =>
    new Promise((resolve, reject) => {
      const up = request(
        {
          host: upstreamHost,
          port: options.upstreamPort,
          method: req.method,
          path: req.url,
          headers: endToEnd(req.headers, body),
          agent: false,
        },
        (res) =>
          readBody(res).then((b) => resolve({ status: res.statusCode ?? 502, headers: res.headers, body: b }), reject),
      );
      up.on('error', reject);
      up.end(body);
    });

  const skewAnswer = (headers: IncomingHttpHeaders, body: Buffer): Buffer => {
    if (!proxy.dateHeader) delete headers.date;
    else if (proxy.skewClockMs !== 0) {
      const date = Date.parse(headers.date ?? '');
      headers.date = new Date((Number.isNaN(date) ? Date.now() : date) + proxy.skewClockMs).toUTCString();
    }
    const shift = proxy.skewClockMs + proxy.skewRecordsMs;
    if (shift === 0 || !/json/i.test(headers['content-type'] ?? '')) return body;
    try {
      return Buffer.from(JSON.stringify(shiftTimestamps(JSON.parse(body.toString('utf8')), shift)));
    } catch {
      return body; // not JSON after all: pass it as it came
    }
  };

  const handle = async (req: IncomingMessage, res: ServerResponse, entry: ProxiedRequest): Promise<void> => {
    // 'close' before the answer finished = the client went away (timeout, reset).
    let clientGone = false;
    res.on('close', () => (clientGone = !res.writableFinished));
    // node:http adds a Date header of its own unless told not to.
    res.sendDate = proxy.dateHeader;
    let body = await readBody(req);
    const rule = take(entry.method, entry.path);

    if (rule && 'fail502' in rule) {
      entry.outcome = 'fail502';
      const payload = Buffer.from(JSON.stringify({ error: 'bad gateway' }));
      res.writeHead(502, {
        'content-type': 'application/json; charset=utf-8',
        'content-length': payload.length,
        ...(proxy.dateHeader ? { date: new Date(Date.now() + proxy.skewClockMs).toUTCString() } : {}),
      });
      res.end(payload);
      return;
    }
    if (rule && 'rewriteBody' in rule)
      body = Buffer.from(JSON.stringify(rule.rewriteBody(JSON.parse(body.toString('utf8')))));
    if (rule?.rewrite) body = Buffer.from(JSON.stringify(rule.rewrite(JSON.parse(body.toString('utf8')))));
    if (rule?.delayMs) await sleep(rule.delayMs, undefined, { signal: holds.signal });
    if (rule && 'holdRequest' in rule) await sleep(rule.holdRequest, undefined, { signal: holds.signal });

    entry.forwardedAt = Date.now();
    let answer: Awaited<ReturnType<typeof forward>>;
    try {
      answer = await forward(req, body);
    } catch {
      entry.outcome = 'upstream-error';
      res.destroy();
      return;
    }
    if (rule && 'applyAndDrop' in rule) {
      entry.outcome = 'dropped';
      res.destroy();
      return;
    }
    if (rule && 'holdAnswer' in rule) await sleep(rule.holdAnswer, undefined, { signal: holds.signal });
    if (clientGone || res.destroyed) {
      entry.outcome = 'client-gone';
      return;
    }
    let upstreamBody = answer.body;
    if (rule && 'rewriteAnswer' in rule) {
      const url = new URL(req.url ?? '/', 'http://proxy');
      const rewritten = rule.rewriteAnswer(JSON.parse(upstreamBody.toString('utf8')), {
        method: entry.method,
        path: entry.path,
        query: url.searchParams,
      });
      upstreamBody = Buffer.from(JSON.stringify(rewritten));
    }
    const out = skewAnswer(answer.headers, upstreamBody);
    entry.outcome = 'answered';
    res.writeHead(answer.status, endToEnd(answer.headers, out));
    res.end(out);
  };

  const server = createServer((req, res) => {
    const entry: ProxiedRequest = {
      method: (req.method ?? 'GET').toUpperCase(),
      path: (req.url ?? '/').split('?')[0] ?? '/',
      arrivedAt: Date.now(),
      forwardedAt: null,
      outcome: 'pending',
    };
    requests.push(entry);
    handle(req, res, entry).catch(() => {
      // Aborted hold (close()) or a body rewriteBody could not parse: nothing to answer with.
      if (entry.outcome === 'pending') entry.outcome = entry.forwardedAt === null ? 'cancelled' : 'client-gone';
      res.destroy();
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const address = server.address();
  const port = address && typeof address === 'object' ? address.port : 0;

  const proxy: CrmFaultProxy = {
    port,
    baseUrl: (workspace) => `http://${workspace}.localhost:${port}/api/external`,
    setRules,
    unspent: () => rules.reduce((sum, { rule, left }) => sum + (rule.times === undefined ? 0 : left), 0),
    skewClockMs: options.skewClockMs ?? 0,
    skewRecordsMs: 0,
    dateHeader: true,
    requests,
    count: (method, path) =>
      requests.filter(
        (r) =>
          r.forwardedAt !== null &&
          (method === undefined || r.method === method.toUpperCase()) &&
          (path?.test(r.path) ?? true),
      ).length,
    async close() {
      holds.abort();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  return proxy;
}

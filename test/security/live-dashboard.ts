import { request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import type { FastifyInstance } from 'fastify';
import { pino } from 'pino';
import { Secret } from '../../src/config/index.js';
import { buildDashboard, SESSION_COOKIE, type DashboardOptions } from '../../src/dashboard/index.js';
import { SessionAuth } from '../../src/dashboard/session-auth.js';
import { startHarness, type Harness, type HarnessOptions } from '../helpers/pipeline.js';
export { seedFailedRun } from '../helpers/seed-runs.js';

/**
 * The security suite's dashboard: a real one, listening on 127.0.0.1 port 0, spoken to over
 * real HTTP (node:http, so every header, Host included, is what the test says).
 */
export const TOKEN = 'security-suite-token-0f1e2d3c4b5a69788796a5b4';

export interface Answer {
  status: number;
  headers: IncomingHttpHeaders;
  body: Buffer;
  text: string;
  json<T = unknown>(): T;
}

export interface Ask {
  method?: string;
  path: string;
  headers?: Record<string, string>;
  body?: string | Buffer;
  /** Destroy the request after this many ms (a client that goes away); resolves with status 0. */
  abortAfterMs?: number;
  /** The address to connect to. Default 127.0.0.1 (the Host header stays `127.0.0.1:<port>`). */
  via?: string;
}

export interface LogLine {
  level: number;
  msg: string;
  [key: string]: unknown;
}

export interface LiveDashboard {
  h: Harness;
  app: FastifyInstance;
  port: number;
  /** `127.0.0.1:<port>`, the Host a browser would send. */
  host: string;
  origin: string;
  logs: LogLine[];
  ask(req: Ask): Promise<Answer>;
  /** Signs in through the form; the Cookie header value of the session. */
  signIn(token?: string): Promise<string>;
  /** The form token of the session, as its pages carry it. */
  formToken(cookie: string): Promise<string>;
  /** A same-origin form post of a signed-in browser. */
  postForm(
    path: string,
    cookie: string,
    fields?: Record<string, string>,
    headers?: Record<string, string>,
  ): Promise<Answer>;
  close(): Promise<void>;
}

/**
 * Every answer (any method: GET, POST, PUT, …, headers and body) and every log line of every
 * dashboard this test file starts is looked through for the secrets it holds as it arrives;
 * what is found is listed here (where, and which secret, never the secret itself).
 * Each file ends by asking that the list be empty.
 */
const leaks: string[] = [];

/** Where an answer or log line of this file carried a secret; [] when none did. */
export function secretLeaks(): string[] {
  return [...leaks];
}

function scanForSecrets(where: string, text: string, secrets: ReadonlyArray<[name: string, value: string]>): void {
  for (const [name, value] of secrets) {
    if (!text.includes(value)) continue;
    // The report names the secret; it must not print it (a failed run's output is shared).
    const place = secrets.reduce((w, [n, v]) => w.split(v).join(`<${n}>`), where);
    leaks.push(`${place}: ${name}`);
  }
}

export function ask(port: number, req: Ask): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const headers = { host: `127.0.0.1:${port}`, ...req.headers };
    const r = httpRequest(
      { host: req.via ?? '127.0.0.1', port, method: req.method ?? 'GET', path: req.path, headers, agent: false },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('error', reject);
        res.on('end', () => {
          const body = Buffer.concat(chunks);
          const text = body.toString('utf8');
          resolve({
            status: res.statusCode ?? 0,
            headers: res.headers,
            body,
            text,
            json: <T>() => JSON.parse(text) as T,
          });
        });
      },
    );
    r.on('error', (err) =>
      req.abortAfterMs !== undefined
        ? resolve({ status: 0, headers: {}, body: Buffer.alloc(0), text: '', json: () => undefined as never })
        : reject(err),
    );
    if (req.abortAfterMs !== undefined) setTimeout(() => r.destroy(), req.abortAfterMs);
    if (req.body !== undefined) r.write(req.body);
    r.end();
  });
}

export function form(fields: Record<string, string>): string {
  return new URLSearchParams(fields).toString();
}

export function csrfOf(page: string): string {
  const m = /name="_csrf" value="([^"]+)"/.exec(page);
  if (!m?.[1]) throw new Error('no form token in the page');
  return m[1];
}

export function cookieOf(answer: Answer): string | null {
  const set = answer.headers['set-cookie'] ?? [];
  const line = set.find((c) => c.startsWith(`${SESSION_COOKIE}=`));
  return line === undefined ? null : (line.split(';')[0] ?? null);
}

/** A multipart/form-data body as a browser sends it. */
export function multipartBody(
  fields: Record<string, string>,
  file?: { name: string; content: string | Buffer },
): { body: Buffer; type: string } {
  const boundary = `----crmsync${Math.random().toString(16).slice(2)}`;
  const parts: Buffer[] = [];
  for (const [k, v] of Object.entries(fields))
    parts.push(Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="${k}"\r\n\r\n${v}\r\n`));
  if (file) {
    parts.push(
      Buffer.from(
        `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="${file.name}"\r\nContent-Type: text/csv\r\n\r\n`,
      ),
    );
    parts.push(typeof file.content === 'string' ? Buffer.from(file.content) : file.content, Buffer.from('\r\n'));
  }
  parts.push(Buffer.from(`--${boundary}--\r\n`));
  return { body: Buffer.concat(parts), type: `multipart/form-data; boundary=${boundary}` };
}

export interface LiveOptions {
  /** Reuse this harness (then close() leaves it open). */
  harness?: Harness;
  harnessOptions?: HarnessOptions;
  /** Default TOKEN; null = --insecure-no-auth. */
  token?: string | null;
  dashboard?: Partial<Omit<DashboardOptions, 'runtime' | 'token'>>;
}

export async function startLiveDashboard(options: LiveOptions = {}): Promise<LiveDashboard> {
  const h = options.harness ?? (await startHarness(options.harnessOptions ?? { records: 10 }));
  const token = options.token === undefined ? TOKEN : options.token;
  const secrets: Array<[string, string]> = [
    ['the API key', h.apiKey],
    ['the suite token', TOKEN],
    ...(token === null
      ? []
      : ([
          ['the dashboard token', token],
          ['the cookie secret', new SessionAuth(new Secret(token)).cookieSecret],
        ] as Array<[string, string]>)),
  ];
  const logs: LogLine[] = [];
  const logger = pino(
    { level: 'info' },
    {
      write: (line: string) => {
        const parsed = JSON.parse(line) as LogLine;
        scanForSecrets(`log line "${String(parsed.msg).slice(0, 120)}"`, line, secrets);
        logs.push(parsed);
      },
    },
  );
  const app = await buildDashboard({
    runtime: h.runtime,
    token: token === null ? null : new Secret(token),
    logger,
    ...options.dashboard,
  });
  const address = await app.listen({ port: 0, host: '127.0.0.1' });
  const port = Number(new URL(address).port);
  const host = `127.0.0.1:${port}`;
  const origin = `http://${host}`;
  const live: LiveDashboard = {
    h,
    app,
    port,
    host,
    origin,
    logs,
    async ask(req) {
      const answer = await ask(port, req);
      scanForSecrets(
        `${req.method ?? 'GET'} ${req.path.slice(0, 120)} → ${answer.status}`,
        `${JSON.stringify(answer.headers)}\n${answer.text}`,
        secrets,
      );
      return answer;
    },
    async signIn(with_ = token ?? '') {
      const res = await live.ask({
        method: 'POST',
        path: '/login',
        headers: { origin, 'content-type': 'application/x-www-form-urlencoded' },
        body: form({ token: with_, next: '/' }),
      });
      const cookie = cookieOf(res);
      if (res.status !== 303 || cookie === null)
        throw new Error(`sign-in answered ${res.status}: ${res.text.slice(0, 200)}`);
      return cookie;
    },
    async formToken(cookie) {
      return csrfOf((await live.ask({ path: '/workspaces', headers: { cookie } })).text);
    },
    async postForm(path, cookie, fields = {}, headers = {}) {
      const _csrf = await live.formToken(cookie);
      return live.ask({
        method: 'POST',
        path,
        headers: { cookie, origin, 'content-type': 'application/x-www-form-urlencoded', ...headers },
        body: form({ _csrf, ...fields }),
      });
    },
    async close() {
      await app.close();
      if (options.harness === undefined) await h.close();
    },
  };
  return live;
}

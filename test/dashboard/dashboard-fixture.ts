import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import { Secret } from '../../src/config/index.js';
import { buildDashboard, SESSION_COOKIE } from '../../src/dashboard/index.js';
import { startHarness, type Harness, type HarnessOptions } from '../helpers/pipeline.js';

export const TOKEN = 'dash-token-0123456789abcdef0123456789';
/** Host header every test request carries; same-origin posts send a matching Origin. */
export const HOST = 'dash.test';
export const ORIGIN = `http://${HOST}`;

export interface DashboardHarness {
  h: Harness;
  app: FastifyInstance;
  /** Headers of a signed-in browser: session cookie, Host. */
  browser: Record<string, string>;
  bearer: Record<string, string>;
  get(url: string, headers?: Record<string, string>): Promise<LightMyRequestResponse>;
  /** The page's form token, as a browser would read it from the form. */
  formToken(url: string): Promise<string>;
  /** A same-origin form post from the signed-in browser, with the form token. */
  post(
    url: string,
    fields?: Record<string, string | string[]>,
    headers?: Record<string, string>,
  ): Promise<LightMyRequestResponse>;
  close(): Promise<void>;
}

export function form(fields: Record<string, string | string[]>): string {
  const p = new URLSearchParams();
  for (const [k, v] of Object.entries(fields)) for (const one of Array.isArray(v) ? v : [v]) p.append(k, one);
  return p.toString();
}

export function csrfOf(body: string): string {
  const m = /name="_csrf" value="([^"]+)"/.exec(body);
  if (!m?.[1]) throw new Error('no form token in the page');
  return m[1];
}

export async function signIn(app: FastifyInstance, token = TOKEN): Promise<string> {
  const res = await app.inject({
    method: 'POST',
    url: '/login',
    headers: { host: HOST, origin: ORIGIN, 'content-type': 'application/x-www-form-urlencoded' },
    payload: form({ token, next: '/' }),
  });
  if (res.statusCode !== 303) throw new Error(`sign-in answered ${res.statusCode}: ${res.body}`);
  const cookie = res.cookies.find((c) => c.name === SESSION_COOKIE);
  if (!cookie) throw new Error('no session cookie');
  return `${SESSION_COOKIE}=${cookie.value}`;
}

export async function startDashboardHarness(options: HarnessOptions = {}): Promise<DashboardHarness> {
  const h = await startHarness(options);
  const app = await buildDashboard({ runtime: h.runtime, token: new Secret(TOKEN) });
  const browser = { host: HOST, cookie: await signIn(app) };
  const bearer = { host: HOST, authorization: `Bearer ${TOKEN}` };
  const get = (url: string, headers: Record<string, string> = browser) => app.inject({ method: 'GET', url, headers });
  const formToken = async (url: string) => csrfOf((await get(url)).body);
  return {
    h,
    app,
    browser,
    bearer,
    get,
    formToken,
    async post(url, fields = {}, headers = {}) {
      const _csrf = await formToken('/');
      return app.inject({
        method: 'POST',
        url,
        headers: { ...browser, origin: ORIGIN, 'content-type': 'application/x-www-form-urlencoded', ...headers },
        payload: form({ _csrf, ...fields }),
      });
    },
    async close() {
      await app.close();
      await h.close();
    },
  };
}

/** A multipart/form-data body as a browser sends it. */
export function multipart(
  fields: Record<string, string>,
  file: { field: string; name: string; content: string },
): { body: Buffer; contentType: string } {
  const boundary = `----crmsync${Math.random().toString(16).slice(2)}`;
  const parts: string[] = [];
  for (const [k, v] of Object.entries(fields))
    parts.push(`--${boundary}\r\nContent-Disposition: form-data; name="${k}"\r\n\r\n${v}\r\n`);
  parts.push(
    `--${boundary}\r\nContent-Disposition: form-data; name="${file.field}"; filename="${file.name}"\r\nContent-Type: text/csv\r\n\r\n${file.content}\r\n`,
  );
  parts.push(`--${boundary}--\r\n`);
  return { body: Buffer.from(parts.join('')), contentType: `multipart/form-data; boundary=${boundary}` };
}

import { request, type Agent, type IncomingHttpHeaders } from 'node:http';

/**
 * A tiny node:http client for tests that must set the Host header (fetch cannot), e.g. to
 * address a simulator workspace (`acme.localhost:PORT`) while connecting to 127.0.0.1.
 */
export interface HttpRequest {
  port: number;
  /** Connect address. Default 127.0.0.1. */
  address?: string;
  /** Default GET. */
  method?: string;
  /** Path with query, e.g. `/api/external/v2/deals?page_size=5`. */
  path: string;
  /** Host header. Default `127.0.0.1:<port>`. */
  host?: string;
  headers?: Record<string, string>;
  /** Sent as JSON (with Content-Type: application/json) unless `rawBody` is given. */
  body?: unknown;
  /** Sent verbatim. */
  rawBody?: string;
  /** Default: no keep-alive (a fresh socket per request). */
  agent?: Agent | false;
}

export interface HttpAnswer {
  status: number;
  headers: IncomingHttpHeaders;
  text: string;
  /** Parsed body, or undefined when it is not JSON. */
  json: unknown;
}

/** Resolves with the answer; rejects when the connection fails or is dropped without one. */
export function httpRequest(req: HttpRequest): Promise<HttpAnswer> {
  const headers: Record<string, string> = { host: req.host ?? `127.0.0.1:${req.port}`, ...req.headers };
  let payload: string | undefined = req.rawBody;
  if (payload === undefined && req.body !== undefined) {
    payload = JSON.stringify(req.body);
    headers['content-type'] ??= 'application/json';
  }
  return new Promise((resolve, reject) => {
    const r = request(
      {
        host: req.address ?? '127.0.0.1',
        port: req.port,
        method: req.method ?? 'GET',
        path: req.path,
        headers,
        agent: req.agent ?? false,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('error', reject);
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          let json: unknown;
          try {
            json = JSON.parse(text);
          } catch {
            json = undefined;
          }
          resolve({ status: res.statusCode ?? 0, headers: res.headers, text, json });
        });
      },
    );
    r.on('error', reject);
    if (payload !== undefined) r.write(payload);
    r.end();
  });
}

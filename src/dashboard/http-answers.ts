import { tmpdir } from 'node:os';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { errorEntry, isCrmSyncError } from '../errors/index.js';
import type { Logger } from '../log/index.js';
import { html } from './html.js';
import { page } from './layout.js';

/** Scripts ask for JSON; browsers get pages and redirects. */
export function wantsJson(request: FastifyRequest): boolean {
  return (request.headers.accept ?? '').includes('application/json');
}

export function sendPage(reply: FastifyReply, body: string, status = 200): FastifyReply {
  return reply.code(status).type('text/html; charset=utf-8').send(body);
}

/** A whole number from a query value, or the fallback. */
export function intParam(value: unknown, fallback: number, min = 1, max = 1_000_000_000): number {
  const n = typeof value === 'string' ? Number(value) : NaN;
  return Number.isInteger(n) && n >= min && n <= max ? n : fallback;
}

/** Seconds a client is asked to wait when the dashboard is busy. */
const BUSY_RETRY_AFTER = 2;

/** A last guard: an error message never shows where the server keeps its temporary files. */
export function withoutServerPaths(message: string): string {
  const tmp = tmpdir().replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  return message.replace(new RegExp(`${tmp}[^\\s'"]*`, 'g'), 'a temporary file');
}

/**
 * Known errors become a plain page (or JSON) with their own message, which never carries a key
 * or token (CrmSyncError's rule); anything else is logged and shown as a generic failure.
 */
export function registerErrorHandler(app: FastifyInstance, logger: Logger): void {
  app.setErrorHandler(async (error: unknown, request, reply) => {
    let status = 500;
    let message = 'Something went wrong on the dashboard server; the details are in its log.';
    let code = 'INTERNAL';
    if (isCrmSyncError(error)) {
      status = errorEntry(error.code).http;
      message = error.message;
      code = error.code;
    } else if (
      typeof error === 'object' &&
      error !== null &&
      'statusCode' in error &&
      typeof error.statusCode === 'number' &&
      error.statusCode < 500
    ) {
      // fastify's own client errors (bad body, too large): their message is about the request.
      status = error.statusCode;
      message = error instanceof Error ? error.message : message;
      code = 'BAD_REQUEST';
    }
    message = withoutServerPaths(message);
    if (code === 'DASHBOARD_BUSY') reply.header('Retry-After', String(BUSY_RETRY_AFTER));
    if (code === 'CLIENT_GONE') {
      logger.info({ url: request.url.slice(0, 200), reason: message }, 'dashboard: work stopped, the client went away');
      return reply.code(status).send();
    }
    if (status >= 500 && code !== 'DASHBOARD_BUSY')
      logger.error({ err: error, url: request.url }, 'dashboard request failed');
    if (wantsJson(request) || request.url.startsWith('/metrics'))
      return reply.code(status).send({ error: code, message });
    return sendPage(
      reply,
      page({
        title: 'Error',
        body: html`<h1>That did not work</h1><div class="notice bad">${message}</div><p><a href="/">Back to the runs</a></p>`,
      }),
      status,
    );
  });
}

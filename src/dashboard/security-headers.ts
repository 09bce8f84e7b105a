import type { FastifyInstance } from 'fastify';
import { BULL_BOARD_CSP, isBullBoardUrl } from './bull-board.js';

const PAGE_CSP =
  "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";
/** One year; no includeSubDomains: the dashboard does not speak for its parent domain's hosts. */
const HSTS = 'max-age=31536000';

/**
 * Headers on every answer. Nothing the dashboard answers may be stored by a browser or a proxy
 * (run data, exports, JSON), except what sets its own Cache-Control (the static assets).
 * HSTS only when the request came over HTTPS (directly, or per a trusted proxy's
 * X-Forwarded-Proto): sent over plain HTTP it would mean nothing, or worse, lock out a
 * loopback dashboard that has no certificate.
 */
export function registerSecurityHeaders(app: FastifyInstance): void {
  app.addHook('onSend', async (request, reply, payload) => {
    reply.header('X-Content-Type-Options', 'nosniff');
    reply.header('Referrer-Policy', 'same-origin');
    reply.header('X-Frame-Options', 'DENY');
    reply.header('Cross-Origin-Opener-Policy', 'same-origin');
    // Our pages need nothing inline; Bull Board's needs its <base> and inline styles, nothing external.
    reply.header('Content-Security-Policy', isBullBoardUrl(request.url) ? BULL_BOARD_CSP : PAGE_CSP);
    if (!reply.hasHeader('cache-control')) reply.header('Cache-Control', 'no-store');
    if (request.protocol === 'https') reply.header('Strict-Transport-Security', HSTS);
    return payload;
  });
}

import { createBullBoard } from '@bull-board/api';
import type { IServerAdapter } from '@bull-board/api/typings/app';
import { BullMQAdapter } from '@bull-board/api/bullMQAdapter';
import { FastifyAdapter } from '@bull-board/fastify';
import type { FastifyInstance } from 'fastify';
import type { Runtime } from '../runtime/index.js';

export const BULL_BOARD_PATH = '/queues';

/**
 * Bull Board's policy: its own scripts and styles from /queues/static (its page has inline
 * styles and a JSON config block, no inline script), nothing from another origin.
 */
export const BULL_BOARD_CSP =
  "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; font-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'self'";

const EXTERNAL_STYLESHEET = /<link[^>]+href="https?:\/\/[^"]*"[^>]*>/g;

/**
 * Bull Board keeps its own links in a user menu; this one is always in sight. Outside its React
 * root, so its app never replaces it; styled inline (the policy allows inline styles, no script).
 */
const BACK_LINK =
  '<a href="/" style="position:fixed;right:16px;bottom:14px;z-index:1000;padding:7px 12px;border-radius:6px;background:#1d2330;color:#fff;font:14px system-ui,sans-serif;text-decoration:none">← Back to the crm-sync dashboard</a>';

export function isBullBoardUrl(url: string): boolean {
  return url === BULL_BOARD_PATH || url.startsWith(`${BULL_BOARD_PATH}/`) || url.startsWith(`${BULL_BOARD_PATH}?`);
}

/**
 * Bull Board's raw queue view, one entry per workspace queue, behind the same auth hook as
 * every page (the hook is global). Read-only: cleaning, removing, retrying or promoting a job
 * there would bypass the run store, so its rows would end with no result and their run would
 * never complete. Row actions belong to the run pages (retry, upload) and pause/resume to the
 * workspaces page, which keep the results in step.
 *
 * Bull Board's readOnlyMode hides the buttons and refuses most actions, but not all of its API
 * (pause-all, add, job-scheduler edits): every method other than GET/HEAD under /queues is
 * refused here, before Bull Board sees it.
 */
export async function mountBullBoard(app: FastifyInstance, runtime: Runtime, workspaces: string[]): Promise<void> {
  app.addHook('onRequest', async (request, reply) => {
    if (request.method === 'GET' || request.method === 'HEAD') return undefined;
    if (!isBullBoardUrl(request.url)) return undefined;
    return reply
      .code(405)
      .header('Allow', 'GET, HEAD')
      .type('text/plain; charset=utf-8')
      .send('Bull Board is read-only here: retry, pause and resume from the run and workspace pages.\n');
  });
  // Bull Board's page asks Google for its fonts: the dashboard loads nothing from elsewhere
  // (BULL_BOARD_CSP refuses it too; removing the link spares the browser a refused request).
  // And the page gets a way back to the dashboard.
  app.addHook('onSend', async (request, reply, payload) => {
    if (
      !isBullBoardUrl(request.url) ||
      typeof payload !== 'string' ||
      !String(reply.getHeader('content-type') ?? '').includes('text/html')
    )
      return payload;
    return payload.replace(EXTERNAL_STYLESHEET, '').replace('</body>', `${BACK_LINK}</body>`);
  });
  const serverAdapter = new FastifyAdapter();
  serverAdapter.setBasePath(BULL_BOARD_PATH);
  createBullBoard({
    queues: workspaces.map((w) => new BullMQAdapter(runtime.queue(w), { readOnlyMode: true, displayName: w })),
    // @bull-board/fastify 9.10.1 pins its own @bull-board/api 9.10.1 next to our 9.10.2: the same
    // interface, but TypeScript sees two declarations of the adapters' private fields.
    serverAdapter: serverAdapter as unknown as IServerAdapter,
    // The way back in its user menu too; no link to the docs site (the operators' hosts may be offline).
    options: {
      uiConfig: {
        boardTitle: 'crm-sync queues',
        miscLinks: [{ text: 'crm-sync dashboard', url: '/' }],
        hideDocsLink: true,
      },
    },
  });
  await app.register(serverAdapter.registerPlugin(), { prefix: BULL_BOARD_PATH });
}

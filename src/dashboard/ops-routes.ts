import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import type { FastifyInstance } from 'fastify';
import type { Registry } from 'prom-client';
import type { Runtime } from '../runtime/index.js';
import { DASHBOARD_CSS, DASHBOARD_JS, UPLOT_CSS_PATH, UPLOT_JS_PATH } from './assets.js';

export interface OpsRoutesOptions {
  runtime: Runtime;
  registry: Registry;
  /** How long /readyz waits for Redis to answer PING. */
  readyTimeoutMs: number;
}

/** uPlot's minified script and stylesheet, as the installed package ships them. */
function readUplot(): { js: string; css: string } {
  const require = createRequire(import.meta.url);
  const read = (file: string) => readFileSync(require.resolve(`uplot/dist/${file}`), 'utf8');
  return { js: read('uPlot.iife.min.js'), css: read('uPlot.min.css') };
}

/** Probes, metrics and the static assets: the routes that are not pages. */
export function registerOpsRoutes(app: FastifyInstance, options: OpsRoutesOptions): void {
  const { runtime, registry } = options;
  // Read once, when the dashboard is built: a missing package fails the start, not a page.
  const uplot = readUplot();

  app.get('/healthz', async (_request, reply) => reply.type('text/plain; charset=utf-8').send('ok\n'));

  app.get('/readyz', async (_request, reply) => {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error('timeout')), options.readyTimeoutMs);
    });
    try {
      const answer = await Promise.race([runtime.redis.ping(), timeout]);
      if (answer !== 'PONG') throw new Error(`unexpected answer ${answer}`);
      return reply.type('text/plain; charset=utf-8').send('ready\n');
    } catch {
      return reply.code(503).type('text/plain; charset=utf-8').send('not ready: Redis does not answer\n');
    } finally {
      clearTimeout(timer);
    }
  });

  app.get('/metrics', async (_request, reply) => {
    const text = await registry.metrics();
    return reply.type(registry.contentType).send(text);
  });

  app.get('/static/dashboard.css', async (_request, reply) =>
    reply.type('text/css; charset=utf-8').header('Cache-Control', 'public, max-age=300').send(DASHBOARD_CSS),
  );
  app.get('/static/dashboard.js', async (_request, reply) =>
    reply.type('text/javascript; charset=utf-8').header('Cache-Control', 'public, max-age=300').send(DASHBOARD_JS),
  );
  app.get(UPLOT_JS_PATH, async (_request, reply) =>
    reply.type('text/javascript; charset=utf-8').header('Cache-Control', 'public, max-age=300').send(uplot.js),
  );
  app.get(UPLOT_CSS_PATH, async (_request, reply) =>
    reply.type('text/css; charset=utf-8').header('Cache-Control', 'public, max-age=300').send(uplot.css),
  );
}

import type { FastifyInstance } from 'fastify';

export interface Route {
  method: string;
  /** With fastify's params (`/runs/:id`). */
  pattern: string;
}

/**
 * Every route the dashboard serves, read from fastify's own route tree (printRoutes), so a route
 * added later is tested without anyone remembering to list it. HEAD is left out (it is GET).
 */
export function listRoutes(app: FastifyInstance): Route[] {
  const tree = app.printRoutes({ commonPrefix: false });
  const stack: string[] = [];
  const routes: Route[] = [];
  for (const line of tree.split('\n')) {
    const m = /^(.*?)[└├]── (.+?) \(([A-Z, ]+)\)$/.exec(line);
    if (!m) continue;
    const depth = Math.round(m[1]!.length / 4);
    stack.length = depth;
    const parent = depth === 0 ? '' : (stack[depth - 1] ?? '');
    const segment = m[2]!;
    const full =
      depth === 0
        ? segment
        : parent.endsWith('/') || segment.startsWith('/')
          ? `${parent}${segment}`
          : `${parent}/${segment}`;
    stack[depth] = full;
    for (const method of m[3]!.split(',').map((s) => s.trim())) {
      if (method !== 'HEAD') routes.push({ method, pattern: full });
    }
  }
  return routes;
}

/** A concrete path for a route pattern. */
export function fill(pattern: string, values: { runId: string; workspace: string; queueName: string }): string {
  return pattern
    .replace(':id', values.runId)
    .replace(':name', values.workspace)
    .replace(':queueName', encodeURIComponent(values.queueName))
    .replace(':jobId', 'no-such-job')
    .replace(':queueStatus', 'failed')
    .replace(':schedulerId', 'no-such-scheduler')
    .replace(/\*$/, 'static/probe.js');
}

// How a plan's prediction reads, for `plan` and `plans show` alike; apart from plans-actions.ts
// so that `plan` does not load the apply side.
import type { PlanRecord } from '../plans/light.js';
import { plural } from '../runs/light.js';

/** `204 requests (200 writes, 4 list pages), about 3 s at 100 requests per 1 s` */
export function predictionWords(plan: PlanRecord): string {
  const p = plan.prediction;
  const parts = `${plural(p.requests, 'request')} (${plural(p.writes, 'write')}, ${plural(p.listPages, 'list page')} for the drift check)`;
  return p.seconds !== undefined
    ? `${parts}, about ${durationWords(p.seconds)} at ${p.limit}`
    : `${parts}; how long is not known: the workspace has no known rate limit (unknown limit)`;
}

function durationWords(seconds: number): string {
  if (seconds < 120) return `${seconds} s`;
  if (seconds < 7200) return `${Math.round(seconds / 60)} min`;
  return `${(seconds / 3600).toFixed(1)} h`;
}

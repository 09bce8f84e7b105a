import { CrmSyncError } from '../errors/index.js';
import type { SimRateLimit } from './sim-options.js';

const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, sec: 1000, m: 60_000, min: 60_000, h: 3_600_000 };

/** Reads `50/s`, `100/10s`, `3000/min`, `5/250ms` as a token bucket of `max` per `windowMs`. */
export function parseRateLimit(text: string): SimRateLimit {
  const m = /^\s*(\d+)\s*\/\s*(\d*)\s*(ms|s|sec|m|min|h)\s*$/i.exec(text);
  const unit = UNIT_MS[m?.[3]?.toLowerCase() ?? ''];
  const max = Number(m?.[1]);
  const count = m?.[2] ? Number(m[2]) : 1;
  if (!m || unit === undefined || max < 1 || count < 1) {
    throw new CrmSyncError('USAGE', `rate "${text}" is not like 50/s, 100/10s or 3000/min`);
  }
  return { max, windowMs: count * unit };
}

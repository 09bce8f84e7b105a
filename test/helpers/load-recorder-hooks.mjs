// Module hooks for load-recorder.mjs (they run on the loader thread).
import { appendFileSync } from 'node:fs';

const log = process.env.CRM_SYNC_LOAD_LOG;

export async function load(url, context, nextLoad) {
  if (log) appendFileSync(log, `${url}\n`);
  return nextLoad(url, context);
}

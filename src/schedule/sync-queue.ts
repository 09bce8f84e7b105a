import { Queue } from 'bullmq';
import type { RedisClient } from '../redis/index.js';
import { bullPrefix } from '../keys/index.js';
import type { SyncDefinition } from './sync-definition.js';

/** Workspace queues are named `{<workspace>}` and workspace names start with a letter or digit, so this queue is never one; braces keep it in one Cluster slot. */
export const SYNC_QUEUE = '{_syncs}';
export const SYNC_JOB_NAME = 'sync';

/** What a tick carries: which sync, and the definition file to read it from at tick time. */
export interface SyncTickData {
  sync: string;
  file: string;
}

export type SyncQueue = Queue<SyncTickData, unknown, string>;

export function openSyncQueue(connection: RedisClient, prefix: string): SyncQueue {
  return new Queue<SyncTickData, unknown, string>(SYNC_QUEUE, {
    connection,
    prefix: bullPrefix(prefix),
    defaultJobOptions: { removeOnComplete: { count: 200 }, removeOnFail: { count: 200 }, attempts: 1 },
  });
}

export interface InstalledSchedule {
  name: string;
  cron?: string;
  timezone?: string;
  next?: string;
}

/** Installs (or updates) one definition's scheduler; its id is the sync name, so twice is once. */
export async function installSchedule(queue: SyncQueue, def: SyncDefinition): Promise<void> {
  await queue.upsertJobScheduler(
    def.name,
    { pattern: def.schedule.cron, tz: def.schedule.timezone },
    {
      name: SYNC_JOB_NAME,
      data: { sync: def.name, file: def.file },
      opts: { removeOnComplete: { count: 200 }, removeOnFail: { count: 200 } },
    },
  );
}

export async function listSchedules(queue: SyncQueue): Promise<InstalledSchedule[]> {
  const all = await queue.getJobSchedulers(0, -1, true);
  return all.map((s) => ({
    name: s.key,
    ...(s.pattern ? { cron: s.pattern } : {}),
    ...(s.tz ? { timezone: s.tz } : {}),
    ...(s.next !== undefined ? { next: new Date(s.next).toISOString() } : {}),
  }));
}

export async function removeSchedule(queue: SyncQueue, name: string): Promise<boolean> {
  return queue.removeJobScheduler(name);
}

/** Makes the installed schedulers equal the definitions: upserts each, removes the rest. */
export async function syncSchedules(
  queue: SyncQueue,
  defs: readonly SyncDefinition[],
): Promise<{ installed: string[]; removed: string[] }> {
  for (const def of defs) await installSchedule(queue, def);
  const wanted = new Set(defs.map((d) => d.name));
  const removed: string[] = [];
  for (const s of await listSchedules(queue)) {
    if (!wanted.has(s.name)) {
      await removeSchedule(queue, s.name);
      removed.push(s.name);
    }
  }
  return { installed: defs.map((d) => d.name), removed };
}

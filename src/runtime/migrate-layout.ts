import { setTimeout as sleep } from 'node:timers/promises';
import { DEFAULTS } from '../config/index.js';
import { CrmSyncError } from '../errors/index.js';
import {
  LAYOUT_VERSION,
  RunKeys,
  bullPrefix,
  generationKey,
  hashTag,
  layoutKey,
  layoutLockKey,
  RUN_STATUSES,
  workBoardKey,
} from '../keys/index.js';
import type { Logger } from '../log/index.js';
import { defineScript, flagReply, isCluster, scanKeys, type RedisClient } from '../redis/index.js';

/** RENAME that does nothing when the source is gone (a migration run again after a crash). */
const RENAME_IF_EXISTS = defineScript({
  file: 'rename-if-exists-2',
  keys: ['fromKey', 'toKey'],
  args: [],
  reply: flagReply,
});

export interface MigrateLayoutOptions {
  /** Where the migration says what it did. Default: silent. */
  logger?: Logger;
  /** How long a process waits for another one's migration (ms). Default DEFAULTS.migration.waitMs. */
  waitMs?: number;
}

export interface MigrationReport {
  runs: number;
  keys: number;
}

/**
 * Brings a prefix to the key layout this version writes (key-layout.ts): version 1 had no hash
 * tags (`<p>:run:<id>`, `<p>:ws:<w>:…`, queue `<w>`), version 2 tags everything of a workspace
 * with `{<w>}`. Every process runs it at start; after the first it is one GET. Version 1 only
 * ever ran on a standalone Redis (a Cluster was refused), so a Cluster is simply marked. The
 * fleet of the older version must be stopped first: its processes would go on writing the old
 * names. The migration renames in place and can be run again after a crash: a key already moved
 * is skipped. docs/architecture.md, "Redis Cluster".
 */
export async function migrateLayout(
  redis: RedisClient,
  prefix: string,
  options: MigrateLayoutOptions = {},
): Promise<MigrationReport | null> {
  const marker = layoutKey(prefix);
  const current = await redis.get(marker);
  if (current === String(LAYOUT_VERSION)) return null;
  if (current !== null && Number(current) > LAYOUT_VERSION)
    throw new CrmSyncError(
      'REDIS_LAYOUT',
      `the keys under prefix ${prefix} were written by a newer crm-sync (layout ${current}; this version knows ${LAYOUT_VERSION}): upgrade this process`,
    );
  const keys = new RunKeys(prefix);
  // Data of version 1 exists only where a run was made or a worker ran (its generation key).
  const hasOldData =
    !isCluster(redis) && (await redis.exists(keys.allRuns(), generationKey(prefix), workBoardKey(prefix))) > 0;
  if (!hasOldData) {
    await redis.set(marker, String(LAYOUT_VERSION));
    return null;
  }
  const lock = layoutLockKey(prefix);
  const waitMs = options.waitMs ?? DEFAULTS.migration.waitMs;
  if ((await redis.set(lock, String(process.pid), 'PX', waitMs, 'NX')) !== 'OK') {
    // Another process of the fleet is migrating: wait for its marker.
    const until = Date.now() + waitMs;
    while (Date.now() < until) {
      await sleep(250);
      if ((await redis.get(marker)) === String(LAYOUT_VERSION)) return null;
    }
    throw new CrmSyncError(
      'REDIS_LAYOUT',
      `another process has been moving the keys under ${prefix} to layout ${LAYOUT_VERSION} for ${waitMs} ms; if it died, delete ${lock} and start again`,
    );
  }
  const started = Date.now();
  options.logger?.info(
    { prefix },
    `moving the keys under ${prefix} to layout ${LAYOUT_VERSION} (hash-tagged by workspace)`,
  );
  const report = await migrateV1(redis, prefix, keys);
  await redis.set(marker, String(LAYOUT_VERSION));
  await redis.del(lock);
  options.logger?.info(
    { prefix, ...report, ms: Date.now() - started },
    `moved ${report.runs} runs and ${report.keys} keys to layout ${LAYOUT_VERSION} in ${Date.now() - started} ms`,
  );
  return report;
}

/** Version 1's names are spelled out below: they exist nowhere else any more. */
async function migrateV1(redis: RedisClient, prefix: string, keys: RunKeys): Promise<MigrationReport> {
  let moved = 0;
  const rename = async (from: string, to: string): Promise<void> => {
    if (await RENAME_IF_EXISTS.run(redis, { fromKey: from, toKey: to }, {})) moved++;
  };
  // Runs: the record names the workspace; results are bucketed up to maxRow. A run's keys move
  // together, the record last (it is what marks the run as not yet moved); 100 runs at a time.
  const moveRun = async (id: string): Promise<boolean> => {
    const old = `${prefix}:run:${id}`;
    const [workspace, status, createdMs, maxRow] = await redis.hmget(old, 'workspace', 'status', 'createdMs', 'maxRow');
    if (!workspace) return false; // moved already, or an id whose record is gone
    const ref = { id, workspace };
    const score = Number(createdMs ?? (await redis.zscore(keys.allRuns(), id)) ?? Date.now());
    const moves: Array<Promise<void>> = [];
    // Not a setting: a run that recorded no row number can only have the first bucket.
    for (let b = 0; b <= keys.bucketOf(Number(maxRow ?? 0)); b++)
      moves.push(rename(`${old}:results:${b}`, keys.resultBucket(ref, b)));
    for (const part of ['problems', 'rounds', 'creating'] as const)
      moves.push(rename(`${old}:${part}`, keys[part](ref)));
    await Promise.all([
      ...moves,
      redis.hset(keys.runWorkspaces(), id, workspace),
      redis.sadd(keys.workspacesWithRuns(), workspace),
      redis.zadd(keys.byWorkspace(workspace), score, id),
      status && (RUN_STATUSES as readonly string[]).includes(status)
        ? redis.zadd(keys.byStatus(workspace, status as (typeof RUN_STATUSES)[number]), score, id)
        : null,
    ]);
    await rename(old, keys.run(ref));
    return true;
  };
  const ids = await redis.zrange(keys.allRuns(), 0, -1);
  let runs = 0;
  for (let i = 0; i < ids.length; i += 100)
    runs += (await Promise.all(ids.slice(i, i + 100).map(moveRun))).filter(Boolean).length;
  // The old indexes (version 2 keeps them per workspace).
  for (const status of RUN_STATUSES) await redis.del(`${prefix}:runs:status:${status}`);
  await scanKeys(redis, `${prefix}:workspace:*:runs`, async (found) => {
    await redis.del(...found);
  });
  // Workspace keys, BullMQ queues and activity series: put the workspace (queue name) in a tag.
  const families: Array<[string, RegExp]> = [
    [`${prefix}:ws:`, /^([A-Za-z0-9_-]+)(:.*)$/],
    [`${bullPrefix(prefix)}:`, /^([A-Za-z0-9_-]+)(:.*)$/],
    [`${prefix}:metrics:series:`, /^([A-Za-z0-9_-]+)(:.*)$/],
  ];
  for (const [base, shape] of families) {
    await scanKeys(redis, `${base}*`, async (found) => {
      await Promise.all(
        found.map((key) => {
          const m = shape.exec(key.slice(base.length));
          return m ? rename(key, `${base}${hashTag(m[1]!)}${m[2]}`) : Promise.resolve();
        }),
      );
    });
  }
  return { runs, keys: moved };
}

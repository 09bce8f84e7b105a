/*
 * Every Redis key crm-sync writes, in one place (<p> = prefix, `CRM_SYNC_PREFIX`, default
 * `crm-sync`; {<w>} = the workspace's hash tag, hashTag() below). The functions below
 * and RunKeys (run-keys.ts) are the only places key names are made; the Lua scripts get theirs as
 * KEYS. docs/architecture.md, "Redis Cluster", says why the tag is the workspace.
 *
 * Cluster rule: every script and MULTI names keys of one workspace only (one tag, one slot);
 * keys without a tag are touched by single commands. Layout version 2 (`<p>:layout`); version 1
 * had no tags and is renamed by migrate-layout.ts.
 *
 * The run store (src/runs, state changes in Lua: src/redis/commands/*.lua, loaded by run-scripts.ts
 * and fence-scripts.ts):
 *   <p>:run:{<w>}:<id>             hash    run record: flat fields (status, counts total/queued/
 *                                          succeeded/failed/skipped/invalid, producerDone '0'|'1',
 *                                          createdAt, createdMs, finishedAt, firstFinishedAt (set once: the
 *                                          end of the first pass), reason, maxRow, producedRow:
 *                                          the highest row handed to the queue) and JSON
 *                                          fields (columns, options)
 *   <p>:run:{<w>}:<id>:results:<b> hash    rows b*100 .. b*100+99: row number → encoded result (status
 *                                          char + compact JSON, see result-codec.ts); small buckets
 *                                          keep Redis' compact listpack encoding; `c<row>` → a copy
 *                                          of the row's create marker (RunKeys.sentField): the
 *                                          evidence its POST was sent, as long as the run lives
 *   <p>:run:{<w>}:<id>:problems    zset    failed, invalid and uncertain rows, score = member = row
 *   <p>:run:{<w>}:<id>:rounds      hash    row → retry round (job generation) of rows `runs retry`
 *                                          requeued; only that round's job may send or record the row
 *   <p>:run:{<w>}:<id>:names       hash    `<field>\u001f<id>` → the name a row gave for that id (the first
 *                                          row's text: `"Negotiation"` for stg_…), so results read
 *                                          `"Negotiation" → stg_…` whatever the CRM renames later
 *   <p>:run:{<w>}:<id>:creating    hash    row → create marker `sentAt|crmClock|kind|dealId[|uncertainAt]`
 *                                          (codec: commands/includes/create-marker.lua, parseMarker in
 *                                          row-fence.ts): a create that may have been applied;
 *                                          TTL = claim retention (createMarkerTtlMs); put back
 *                                          from its copy in the result bucket when gone
 *   <p>:ws:{<w>}:order:<res>:<id>  hash    write order of one CRM record, per field: `f:<field>` →
 *                                          `<seq>|<value JSON>`, `~` → the write on the wire (JSON),
 *                                          `*` → a seq that wrote every field (an earlier version's
 *                                          string `applied[|inflight|untilMs]` is read as that);
 *                                          a seq is `<runId>#<row, base36, 7 wide>` (run ids sort by
 *                                          creation time); TTL = the ordering window
 *                                          (commands/includes/write-order.lua)
 *   <p>:ws:{<w>}:create:<fp>       string  owner `<runId>/<row>` of the one create in flight for a content
 *                                          fingerprint; TTL = the request lease (or the settle time)
 *   <p>:ws:{<w>}:claim:<dealId>    string  `<runId>/<row>` that recorded the deal; TTL = claim retention
 *                                          (createMarkerTtlMs: the config's retention + 2 days)
 *   <p>:ws:{<w>}:record-clock      string  the CRM's record clock against Redis' from answered creates:
 *                                          `lo|hi|atMs|resolutionMs` (created_at - Redis time is in
 *                                          [lo, hi]); TTL = claim retention
 *   <p>:ws:{<w>}:upserted:<hash>   string  the deal an upsert created for a match key (sha1 of
 *                                          `key=value`); TTL = claim retention
 *   <p>:ws:{<w>}:lookup            hash    the workspace's deal-list passes: next start, the pass under
 *                                          way and its lease, the last snapshot's start (LookupPassBoard)
 *   <p>:ws:{<w>}:lookup:snap       string  gzip'd deals the last pass saw; TTL 15 min
 *   <p>:ws:{<w>}:before:<res>      hash    the same board for the whole-list passes over <res> (deals, contacts,
 *                                          leads) that serve plain imports' before-values (DriftCheck)
 *   <p>:ws:{<w>}:before:<res>:snap string  gzip'd JSON of the last such pass: its start (Redis clock) and
 *                                          duration, the workspace, and every record packed (id and canonical
 *                                          comparable values); TTL 15 min; not written past 32 MiB gzip'd
 *   <p>:ws:{<w>}:before-run:<id>   string  when a process of the workspace first asked for run <id>'s
 *                                          before-values (Redis clock): no pass begun earlier serves the run;
 *                                          TTL 15 min from the last process that joined the run
 *   <p>:ws:{<w>}:refs:<list>       string  the references (pipelines with their stages, tags, companies:
 *                                          id and name) one pass over the workspace's <list> (deals,
 *                                          contacts, leads) showed, JSON with the pass's start
 *                                          (src/references); read by every process that resolves names,
 *                                          refreshed once older than `referencesMaxAgeMs`; TTL 7 days
 *   <p>:ws:{<w>}:holds             hash    why the workspace's queue is paused: `paused` (an operator,
 *                                          `workspace pause`), `blocked` (the CRM refused the key) and
 *                                          `unreachable` (the circuit breaker: the CRM does not answer),
 *                                          each JSON {reason, since}; the queue runs again only when
 *                                          none is left (docs/architecture.md, "Pauses")
 *   <p>:ws:{<w>}:holds:lifted      hash    kind → when that hold was last lifted (epoch ms): a 401 to a
 *                                          request sent before `runs resume` blocks nothing again; TTL 1 h
 *   <p>:ws:{<w>}:runs              zset    run ids of a workspace, score = createdAt (ms)
 *   <p>:ws:{<w>}:runs:status:<s>   zset    the workspace's run ids by status, score = createdAt (ms)
 *                                          (running, blocked, completed, failed, cancelled); the
 *                                          scripts move runs between them
 *   <p>:runs                       zset    every run id, score = createdAt (ms)
 *   <p>:runs:workspace             hash    run id → workspace: how a run id finds its keys
 *   <p>:runs:workspaces            set     workspaces with runs (a fleet-wide listing by status merges theirs)
 *   <p>:sync:<name>:runs           zset    run ids started by a sync definition, score = createdAt
 *   <p>:layout                     string  the layout version of this prefix ('2')
 *   <p>:layout:migrating           string  pid of the process moving an older layout; TTL 10 min
 *
 * Change control (src/plans; approve, discard and apply in Lua: commands/move-plan-2.lua):
 *   <p>:plan:{<w>}:<id>            hash    a plan: flat fields (status pending|approved|applying|applied|
 *                                          discarded, operation, source, createdMs, expiresMs, approvedMs,
 *                                          approvedBy, runId, rows, syncName, reason) and JSON fields (counts, prediction,
 *                                          options, columns); TTL = expiresMs + PLAN_KEEP_MS
 *   <p>:plan:{<w>}:<id>:rows:<b>   hash    rows b*100 .. b*100+99 of the plan: row → compact JSON (plan-codec.ts:
 *                                          action, line, record id, key, fields to send, before-values,
 *                                          message); same TTL
 *   <p>:ws:{<w>}:plans             zset    the workspace's plan ids, score = createdMs
 *   <p>:ws:{<w>}:sync-plan:<name>  string  the plan id of the sync's newest tick (a newer tick discards
 *                                          the plan it names while it still waits); TTL = the plan's
 *   <p>:ws:{<w>}:undo-of:<runId>   hash    the undo of run <runId>: plan (the newest undo plan), taken and
 *                                          takenMs (the undo plan last taken for applying, Redis clock);
 *                                          TTL = the newest plan's
 *   <p>:plans:workspace            hash    plan id → workspace: how a plan id finds its keys
 *
 * History (src/history; only with a PostgreSQL history configured):
 *   <p>:ws:{<w>}:history           hash    per run, what reached the history table: `<id>:l` → succeeded
 *                                          results written by the worker that stored them (counted after
 *                                          the INSERT), `<id>:s` → the run's succeeded count when a catch-up
 *                                          last wrote all its stored results; a run whose succeeded count is
 *                                          above both owes history (HistoryMarks); deleteRun removes its fields
 *   <p>:ws:{<w>}:history:gaps      hash    run id → JSON {rows, reason, at}: succeeded rows whose changes can
 *                                          no longer reach the table (results gone from Redis first)
 *   <p>:ws:{<w>}:history:lock      string  one process of the fleet catches the workspace up per period; TTL
 *
 * Queues and workers:
 *   <p>:q:{<w>}:…                  BullMQ  the workspace's queue, named `{<w>}` (BullMQ's own keys
 *                                          under prefix <p>:q; the name's tag keeps the queue in one slot)
 *   <p>:q:{<syncs queue>}:…        BullMQ  the nightly-sync scheduler's queue (src/schedule/sync-queue.ts)
 *   <p>:ws:{<w>}:bucket            string  the workspace's request budget: the next send time (GCRA)
 *   <p>:ws:{<w>}:bucket:rate       string  the learned rate of a workspace without a known limit; no TTL
 *   <p>:work                       zset    workspace → signal count: workspaces with work (WorkBoard)
 *   <p>:work:sweep                 string  lock of the fleet's sweep for unsignalled jobs; TTL 5 min
 *   <p>:pools                      hash    worker process id → what it serves, when it said so (PoolPresence)
 *   <p>:generation                 string  `<random>@<time>`: tells a Redis that lost its data (redis-generation.ts)
 *   <p>:probe:<w>                  string  the Redis-full guard's write probe; short TTL
 *   <p>:scheduler:probe            string  the same, of the sync scheduler's worker
 *   <p>:housekeeping:lock          string  one process of the fleet runs retention per period
 *   <p>:sync:<name>:lock           string  one run of a sync definition at a time (SyncLock)
 *
 * Metrics (src/metrics):
 *   <p>:metrics                    hash    fleet counters, field = metric + labels
 *   <p>:metrics:series:{<w>}:<b>   hash    a workspace's 10 s activity buckets; TTL
 *   <p>:metrics:run:<id>           hash    a run's activity series; TTL 3 days after its last write
 *
 * Dashboard (src/dashboard):
 *   <p>:dashboard:session:<token fingerprint>:<sha256 of the session id>   string  a session; TTL idle time
 *   <p>:dashboard:auth-failures:<client>                                   the sign-in throttle (auth-throttle.ts): hash f, i
 *   <p>:dashboard:upload:<token>   string  an upload's answer, read once by the page it redirects to; TTL
 *   <p>:ws:{<w>}:import:<id>       string  a browser import (import-store.ts): JSON of its file, mapping, check,
 *                                          plan and run; TTL = its plan's life (the file goes with it)
 *   <p>:ws:{<w>}:imports           zset    the workspace's import ids, score = createdMs (the history list)
 *   <p>:ws:{<w>}:import-plan:<planId> string the import a plan was made for; TTL = the import's
 *   <p>:ws:{<w>}:import-mapping:<h> string  the mapping last used in the workspace for a header set (h: sha1
 *                                          of its sorted columns), offered first next time; TTL 180 days
 *
 * Workspace names are letters, digits, `-` and `_`, so `<p>:q:{<w>}` and `<p>:ws:{<w>}:…` never
 * meet another family; run ids have no `:`.
 */

/**
 * `{<workspace>}`: the Redis Cluster hash tag of everything one workspace's rows touch (its
 * queue, its runs' keys, its write fence). A script or MULTI only ever names keys of one
 * workspace, so on a Cluster they all sit in one slot; different workspaces spread over the
 * masters. Workspace names are letters, digits, `-` and `_`, never braces.
 */
export function hashTag(workspace: string): string {
  return `{${workspace}}`;
}

/** Where every key of one workspace starts: `<p>:ws:{<w>}` (RunKeys and the request budget). */
export function workspaceKeyBase(prefix: string, workspace: string): string {
  return `${prefix}:ws:${hashTag(workspace)}`;
}

/** The layout this version writes; migrate-layout.ts brings an older prefix to it. */
export const LAYOUT_VERSION = 2;

export function layoutKey(prefix: string): string {
  return `${prefix}:layout`;
}

/** Held by the one process moving an older layout's keys (migrate-layout.ts). */
export function layoutLockKey(prefix: string): string {
  return `${layoutKey(prefix)}:migrating`;
}

/** BullMQ's prefix: its keys are `<p>:q:<queue name>:<type>`. */
export function bullPrefix(prefix: string): string {
  return `${prefix}:q`;
}

/** The work board (WorkBoard). */
export function workBoardKey(prefix: string): string {
  return `${prefix}:work`;
}

/** Worker processes' announcements (PoolPresence). */
export function poolsKey(prefix: string): string {
  return `${prefix}:pools`;
}

/** Written once by the first process that finds none; read again on every reconnect. */
export function generationKey(prefix: string): string {
  return `${prefix}:generation`;
}

/** One list pass's references of a workspace (src/references: names → ids). */
export function referencesKey(prefix: string, workspace: string, list: string): string {
  return `${workspaceKeyBase(prefix, workspace)}:refs:${list}`;
}

/** The one key of a workspace's budget, shared by its workers and by whoever pages its lists. */
export function requestBudgetKey(prefix: string, workspace: string): string {
  return `${workspaceKeyBase(prefix, workspace)}:bucket`;
}

/** The Redis-full guard's probe of a workspace's worker. */
export function probeKey(prefix: string, workspace: string): string {
  return `${prefix}:probe:${workspace}`;
}

/** The Redis-full guard's probe of the sync scheduler's worker. */
export function schedulerProbeKey(prefix: string): string {
  return `${prefix}:scheduler:probe`;
}

export function housekeepingLockKey(prefix: string): string {
  return `${prefix}:housekeeping:lock`;
}

export function syncLockKey(prefix: string, sync: string): string {
  return `${prefix}:sync:${sync}:lock`;
}

export function metricsKey(prefix: string): string {
  return `${prefix}:metrics`;
}

export function seriesKey(prefix: string, workspace: string, bucket: number): string {
  return `${prefix}:metrics:series:${hashTag(workspace)}:${bucket}`;
}

export function runSeriesKey(prefix: string, runId: string): string {
  return `${prefix}:metrics:run:${runId}`;
}

/** Where every dashboard session key starts (`sessionKey` appends fingerprint and id hash). */
export function sessionKeyBase(prefix: string): string {
  return `${prefix}:dashboard:session:`;
}

export function sessionKey(prefix: string, fingerprint: string, sidHash: string): string {
  return `${sessionKeyBase(prefix)}${fingerprint}:${sidHash}`;
}

/** The sign-in throttle's per-client hash: wrong tokens in the window (f), checks in flight (i). */
export function authFailuresNamespace(prefix: string): string {
  return `${prefix}:dashboard:auth-failures:`;
}

export function uploadAnswerKey(prefix: string, token: string): string {
  return `${prefix}:dashboard:upload:${token}`;
}

/** A browser import's record (src/dashboard/import-store.ts). */
export function importKey(prefix: string, workspace: string, id: string): string {
  return `${workspaceKeyBase(prefix, workspace)}:import:${id}`;
}

/** The workspace's import ids by creation time. */
export function workspaceImportsKey(prefix: string, workspace: string): string {
  return `${workspaceKeyBase(prefix, workspace)}:imports`;
}

/** The import a plan was made for: the plan page links back, Apply goes on to the run. */
export function importOfPlanKey(prefix: string, workspace: string, planId: string): string {
  return `${workspaceKeyBase(prefix, workspace)}:import-plan:${planId}`;
}

/** The mapping last used in a workspace for a header set (`headerHash`: sha1 of the sorted columns). */
export function importMappingKey(prefix: string, workspace: string, headerHash: string): string {
  return `${workspaceKeyBase(prefix, workspace)}:import-mapping:${headerHash}`;
}

/** A plan's hash (src/plans); its row buckets are `<this>:rows:<b>`. */
export function planKey(prefix: string, workspace: string, id: string): string {
  return `${prefix}:plan:${hashTag(workspace)}:${id}`;
}

export function planRowsKey(prefix: string, workspace: string, id: string, bucket: number): string {
  return `${planKey(prefix, workspace, id)}:rows:${bucket}`;
}

/** The workspace's plan ids by creation time. */
export function workspacePlansKey(prefix: string, workspace: string): string {
  return `${workspaceKeyBase(prefix, workspace)}:plans`;
}

/** The plan of a nightly sync's newest planned tick (src/schedule/run-sync.ts). */
export function syncPlanKey(prefix: string, workspace: string, sync: string): string {
  return `${workspaceKeyBase(prefix, workspace)}:sync-plan:${sync}`;
}

/**
 * "The undo of run X" (src/undo): the newest undo plan of the run, and the undo plan last taken
 * for applying and when — an older plan, or one made before that undo was taken, is refused
 * (commands/claim-undo-1.lua, move-plan-2.lua).
 */
export function undoClaimKey(prefix: string, workspace: string, runId: string): string {
  return `${workspaceKeyBase(prefix, workspace)}:undo-of:${runId}`;
}

/** Plan id → workspace, for commands that name a plan by its id alone. */
export function planWorkspacesKey(prefix: string): string {
  return `${prefix}:plans:workspace`;
}

/** Per run, how many of its succeeded results reached the history table (HistoryMarks). */
export function historyMarksKey(prefix: string, workspace: string): string {
  return `${workspaceKeyBase(prefix, workspace)}:history`;
}

/** Runs whose changes can no longer reach the history table, and why. */
export function historyGapsKey(prefix: string, workspace: string): string {
  return `${historyMarksKey(prefix, workspace)}:gaps`;
}

/** Held by the one process catching a workspace's history up this period. */
export function historyLockKey(prefix: string, workspace: string): string {
  return `${historyMarksKey(prefix, workspace)}:lock`;
}

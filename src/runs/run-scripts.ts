import {
  asNumber,
  codeReply,
  defineScript,
  flagReply,
  numberReply,
  stringListReply,
  valueReply,
} from '../redis/index.js';
import { RESULT_BUCKET_ROWS } from '../keys/index.js';
import { countOf } from '../counts/index.js';
import type { RunCounts, RunStatus } from './run-types.js';

/*
 * The run store's scripts (src/redis/commands/*.lua; each file's header names its KEYS and
 * ARGV, and each wrapper here names the same, test/redis/script-contracts.test.ts). Every one
 * gets KEYS[1] = the run hash and KEYS[2..5] = the status indexes (running, blocked, completed,
 * failed; cancelled is derived), so a status change and its index move happen in the same
 * atomic step as the counts that caused it (includes/run-status.lua). They answer
 * `RUN_NOT_FOUND` as an error reply when the run hash is gone; RunStore turns that into a
 * CrmSyncError.
 *
 * Result buckets are named inside the scripts from the row (one key per RESULT_BUCKET_ROWS
 * rows cannot be listed in KEYS up front). That is Cluster-safe: the buckets share the run's
 * workspace hash tag, and so its slot (keys/key-layout.ts).
 */
const BUCKETS = { RESULT_BUCKET_ROWS };

/** includes/run-status.lua: the five KEYS of every run script (RunKeys.runStatusKeys). */
const RUN = ['runKey', 'runningKey', 'blockedKey', 'completedKey', 'failedKey'] as const;
/** The result buckets, the problems index and the rows' retry rounds, after RUN. */
const ROWS = [...RUN, 'resultsBase', 'problemsKey', 'roundsKey'] as const;

/**
 * Why the write fence refused a row: its job attempt is stale (`lock`, `round`), it has a result
 * (`exists`), its run was cancelled, failed for evicted keys (`halted`, REDIS_EVICTS) or is gone.
 */
export const REFUSAL_REASONS = ['lock', 'round', 'exists', 'cancelled', 'halted', 'gone'] as const;
export type RefusalReason = (typeof REFUSAL_REASONS)[number];

/** The counts in the order the scripts return them (COUNTS in src/redis/commands/includes/row-results.lua). */
export const COUNT_NAMES = [
  'total',
  'queued',
  'succeeded',
  'failed',
  'skipped',
  'invalid',
  'superseded',
  'uncertain',
  'cancelled',
  'drifted',
] as const satisfies ReadonlyArray<keyof RunCounts>;

/** A chunk of RECORD_RESULTS: the run's counts after it, and the rows refused with why. */
export interface RecordedChunk {
  counts: RunCounts;
  refused: Array<{ row: number; reason: RefusalReason }>;
}

/** Stores rows' results, fenced (docs/architecture.md, "Delivery guarantees"). */
export const RECORD_RESULTS = defineScript({
  file: 'record-results-8',
  keys: ROWS,
  args: ['fromQueue', 'now', 'windowMs'],
  rest: 'rows',
  constants: BUCKETS,
  reply: valueReply((raw): RecordedChunk => {
    const reply = (Array.isArray(raw) ? raw : []) as ReadonlyArray<string | number | null>;
    const counts = {} as RunCounts;
    COUNT_NAMES.forEach((name, i) => (counts[name] = countOf(reply[i])));
    const refused: RecordedChunk['refused'] = [];
    for (let r = COUNT_NAMES.length; r + 1 < reply.length; r += 2)
      refused.push({ row: Number(reply[r]), reason: String(reply[r + 1]) as RefusalReason });
    return { counts, refused };
  }),
});
/** -1: the run was cancelled (nothing counted); 0: a repeated step; 1: counted. */
export const ADD_QUEUED = defineScript({
  file: 'add-queued-5',
  keys: RUN,
  args: ['count', 'throughRow'],
  reply: codeReply([-1, 0, 1]),
});
export const FINISH_PRODUCING = defineScript({
  file: 'finish-producing-5',
  keys: RUN,
  args: ['now'],
  reply: codeReply([1]),
});
/** Answers the run's status. */
export const TOUCH_PRODUCER = defineScript({
  file: 'touch-producer-5',
  keys: RUN,
  args: ['now'],
  reply: valueReply((raw) => raw as RunStatus),
});
export const CANCEL_RUN = defineScript({ file: 'cancel-run-5', keys: RUN, args: ['now', 'reason'], reply: flagReply });
/** 1: failed; 2: every row had been queued or recorded (finished instead); 0: left alone. */
export const FAIL_IF_PRODUCER_GONE = defineScript({
  file: 'fail-if-producer-gone-5',
  keys: RUN,
  args: ['now', 'seenBefore', 'reason'],
  reply: codeReply([0, 1, 2]),
});
export const SOURCE_READ = defineScript({ file: 'source-read-5', keys: RUN, args: ['columns'], reply: codeReply([1]) });
export const BEGIN_PRODUCING = defineScript({
  file: 'begin-producing-5',
  keys: RUN,
  args: ['now', 'lastPassMs'],
  reply: codeReply([1]),
});
export const BLOCK_RUN = defineScript({ file: 'block-run-5', keys: RUN, args: ['now', 'reason'], reply: flagReply });
export const RESUME_RUN = defineScript({ file: 'resume-run-5', keys: RUN, args: ['now'], reply: flagReply });
export const SET_STATUS = defineScript({
  file: 'set-status-5',
  keys: RUN,
  args: ['status', 'now', 'reason'],
  reply: codeReply([1]),
});
export const SET_PRODUCER = defineScript({
  file: 'set-producer-5',
  keys: RUN,
  args: ['producer'],
  reply: codeReply([1]),
});
/**
 * Takes failed, invalid, uncertain and cancelled rows back for a retry: pairs of row and the
 * removed encoded result.
 */
export const REQUEUE_ROWS = defineScript({
  file: 'requeue-rows-8',
  keys: ROWS,
  args: ['now', 'round', 'resend'],
  rest: 'rows',
  constants: BUCKETS,
  reply: stringListReply,
});
/** Redis's clock (ms); the key: any key of the workspace, to route it on a Cluster. */
export const SERVER_TIME = defineScript({
  file: 'server-time-1',
  keys: ['workspaceKey'],
  args: [],
  reply: numberReply,
});
/** Lifts one kind of a workspace's hold: whether it was there, and how many holds are left. */
export const LIFT_HOLD = defineScript({
  file: 'lift-hold-1',
  keys: ['holdsKey'],
  args: ['kind'],
  reply: valueReply((raw) => {
    const [removed, left] = (Array.isArray(raw) ? raw : []) as unknown[];
    return { lifted: asNumber(removed) === 1, holdsLeft: asNumber(left) };
  }),
});
/** Names an undo run on the run it undoes: false when the undone run's hash is gone. */
export const LINK_UNDO = defineScript({ file: 'link-undo-1', keys: ['runKey'], args: ['undoId'], reply: flagReply });

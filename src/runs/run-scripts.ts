import { LuaScript } from '../redis/index.js';
import { RESULT_BUCKET_ROWS } from '../keys/index.js';

/*
 * The run store's scripts (src/redis/commands/*.lua; each file's header names its KEYS and
 * ARGV). Every one gets KEYS[1] = the run hash and KEYS[2..5] = the status indexes (running,
 * blocked, completed, failed; cancelled is derived), so a status change and its index move
 * happen in the same atomic step as the counts that caused it (includes/run-status.lua). They
 * answer `RUN_NOT_FOUND` as an error reply when the run hash is gone; RunStore turns that into
 * a CrmSyncError. RunStore builds the key and argument lists.
 *
 * Result buckets are named inside the scripts from the row (one key per RESULT_BUCKET_ROWS
 * rows cannot be listed in KEYS up front). That is Cluster-safe: the buckets share the run's
 * workspace hash tag, and so its slot (keys/key-layout.ts).
 */
const BUCKETS = { RESULT_BUCKET_ROWS };

/** Stores rows' results, fenced (docs/architecture.md, "Delivery guarantees"). */
export const RECORD_RESULTS = LuaScript.load('record-results-8', BUCKETS);
export const ADD_QUEUED = LuaScript.load('add-queued-5');
export const FINISH_PRODUCING = LuaScript.load('finish-producing-5');
export const TOUCH_PRODUCER = LuaScript.load('touch-producer-5');
export const CANCEL_RUN = LuaScript.load('cancel-run-5');
export const FAIL_IF_PRODUCER_GONE = LuaScript.load('fail-if-producer-gone-5');
export const SOURCE_READ = LuaScript.load('source-read-5');
export const BEGIN_PRODUCING = LuaScript.load('begin-producing-5');
export const BLOCK_RUN = LuaScript.load('block-run-5');
export const RESUME_RUN = LuaScript.load('resume-run-5');
export const SET_STATUS = LuaScript.load('set-status-5');
export const SET_PRODUCER = LuaScript.load('set-producer-5');
/** Takes failed, invalid, uncertain and cancelled rows back for a retry. */
export const REQUEUE_ROWS = LuaScript.load('requeue-rows-8', BUCKETS);
/** Redis's clock (ms); KEYS[1] any key of the workspace, to route it on a Cluster. */
export const SERVER_TIME = LuaScript.load('server-time-1');
/** Lifts one kind of a workspace's hold; answers {removed, holds left}. */
export const LIFT_HOLD = LuaScript.load('lift-hold-1');
/** Names an undo run on the run it undoes; KEYS[1] the undone run's hash. */
export const LINK_UNDO = LuaScript.load('link-undo-1');

import { runShape } from '../crm/index.js';
import { CrmSyncError } from '../errors/index.js';
import type { RunRecord } from '../runs/index.js';

/** Why a run followed by a command is gone from Redis, as far as the command can tell. */
export type GoneCause =
  /** Redis no longer holds the generation it held at the command's start: restarted empty, flushed. */
  | { kind: 'lost' }
  /**
   * Redis evicted keys (REDIS_EVICTS): the run's keys may have been among them. The import that
   * says so failed the run and waited out the requests on the wire first (import-action.ts halt).
   */
  | { kind: 'evicted'; policy: string; evictedKeys: number }
  /** Redis kept its generation and evicts nothing: lost some other way, or deleted. */
  | { kind: 'unknown' };

export interface RunGoneFacts {
  runId: string;
  /** The run as last read before it was gone (its counts are the "as far as known"). */
  lastSeen?: RunRecord;
  /** When `lastSeen` was read. */
  lastSeenAt?: Date;
  /** Rows the producer had handed to the queue, when this process produced them. */
  handed?: number;
  cause: GoneCause;
  /**
   * How to name the source again in advice (`crm-sync import deals.csv -w acme --mapping m.json`,
   * without --op and reconcile options). Default: built from the run's source and workspace.
   */
  importCommand?: string;
}

/**
 * The run's data is gone from Redis while a command followed it. Carries what the command knew
 * last, so a caller that knows more (the import that produced it) can say it better.
 */
export class RunGoneError extends CrmSyncError {
  readonly facts: RunGoneFacts;

  constructor(facts: RunGoneFacts) {
    super('REDIS_DATA_LOST', runGoneWords(facts));
    this.facts = facts;
  }
}

/**
 * What an operator must be told when Redis lost a run: that Redis lost it (never "no run with
 * id", never "nothing was sent"), how many rows were sent before as far as known (a lower bound
 * from the last read, and how many more may have been), and a way on that does no damage: a file
 * with creates is never imported plainly again (every create that reached the CRM would be made
 * twice); a reconciled import creates only the deals that do not exist yet.
 */
export function runGoneWords(facts: RunGoneFacts): string {
  const { runId, lastSeen: run } = facts;
  const why =
    facts.cause.kind === 'lost'
      ? 'Redis lost its data (restarted without persistence, or flushed)'
      : facts.cause.kind === 'evicted'
        ? `Redis evicted ${facts.cause.evictedKeys} keys (maxmemory-policy ${facts.cause.policy}) [REDIS_EVICTS]`
        : 'Redis lost its data, or the run was deleted';
  const lines = [
    facts.cause.kind === 'evicted'
      ? `Redis lost keys of run ${runId} while it was under way: ${why}. Its queued rows, results or its place in the run lists may be among them, so it cannot finish: ` +
        'it is failed, no worker sends another of its rows, and the requests that were on the wire have ended.'
      : `Redis lost run ${runId} while it was under way: ${why}. Its record, queued rows and results are gone, so the run cannot finish.`,
  ];
  if (run) {
    const c = run.counts;
    // Not a setting: without a producer's own count, the run's counts say what was handed.
    const handed = Math.max(facts.handed ?? 0, c.total - c.invalid);
    const known = c.succeeded + c.failed + c.skipped + c.superseded + c.uncertain + c.drifted + c.cancelled;
    const at = facts.lastSeenAt ? ` at ${facts.lastSeenAt.toISOString()}` : '';
    lines.push(
      `Sent before the loss, as far as known: at least ${c.succeeded} rows reached the CRM (${c.succeeded} succeeded, ${c.failed} failed, ${c.uncertain} uncertain when the run was last read${at}); ` +
        `${handed} rows had been handed to the workers, so up to ${Math.max(0, handed - known)} more may have reached it since.`,
    );
  } else if (facts.handed !== undefined) {
    lines.push(
      `Sent before the loss, as far as known: ${facts.handed} rows had been handed to the workers; any of them may have reached the CRM.`,
    );
  }
  lines.push(advice(facts));
  lines.push(
    'So that a restart keeps runs: give Redis persistence (appendonly yes) and maxmemory-policy noeviction ("crm-sync check" says what it has).',
  );
  return lines.join('\n');
}

function advice(facts: RunGoneFacts): string {
  const run = facts.lastSeen;
  const op = run?.operation;
  const again = facts.importCommand ?? (run ? `crm-sync import ${quote(run.source)} -w ${run.workspace}` : undefined);
  if (op === undefined || again === undefined)
    return 'Before importing its file again, look in the CRM for what it already holds: creates and invites that went out would be made twice.';
  const shape = runShape(op);
  if (shape === 'create')
    return (
      'Do NOT import the file again as it is: every create that reached the CRM would be made a second time. ' +
      `Send the rest with a reconciled import, which creates only the deals that do not exist yet (matched by name) and leaves the others as they are: ${again} --op ${op} --upsert --match name --wait`
    );
  if (shape === 'sync' || run?.options.reconcile)
    return `Run the same reconciled import again (its --reconcile or --upsert and --match options): it sends only what still differs and matches the deals that exist instead of creating them again: ${again} …`;
  if (shape === 'invite')
    return 'Invitations that went out would go out again if the file were imported as it is: import only the addresses the team does not have yet.';
  return `Updates are safe to send again (the same values): ${again} --op ${op} --wait (or with --reconcile to send only what still differs).`;
}

function quote(source: string): string {
  return /^[\w./:@-]+$/.test(source) ? source : `'${source.replaceAll("'", "'\\''")}'`;
}

import type { ReconcileOperation } from '../crm/light.js';
import type { DialectFacts } from '../ingest/index.js';

/**
 * A plan's life: `pending` (stored, nobody approved it), `approved`, `applying` (apply took it:
 * its run is being produced), `applied` (every write of it is queued in its run), `discarded`.
 * `expired` is not stored: it is a pending or approved plan past `expiresAt`.
 */
export const PLAN_STATUSES = ['pending', 'approved', 'applying', 'applied', 'discarded'] as const;
export type PlanStatus = (typeof PLAN_STATUSES)[number];

/** What the planner decided for a row (reconcile's PlanAction). */
export type PlanAction = 'update' | 'create' | 'skip' | 'not-found' | 'ambiguous' | 'invalid';
export type PlanCounts = Record<PlanAction, number>;

/** What applying the plan is expected to take at the workspace's limit. */
export interface PlanPrediction {
  /** Writes (one request each) plus the drift check's list pages (one pass, at least). */
  requests: number;
  writes: number;
  listPages: number;
  /** At the workspace's known limit; undefined when the limit is unknown (said so). */
  seconds?: number;
  /** `200 requests per 60 s`, or `unknown limit`. */
  limit: string;
}

export interface PlanApproval {
  at: string;
  /** `cli:<user>@<host>` or `dashboard:<session>`. */
  by: string;
}

export interface PlanRecord {
  id: string;
  workspace: string;
  operation: ReconcileOperation;
  /** The source's label (a path, stdin's copy, or `postgres (…): <query>`). */
  source: string;
  matchKey: string;
  status: PlanStatus;
  /** True for a pending or approved plan past `expiresAt`: it can no longer be approved or applied. */
  expired: boolean;
  createdAt: string;
  expiresAt: string;
  approval?: PlanApproval;
  /** When and by whom it was discarded (the same shape as an approval). */
  discard?: PlanApproval;
  /** When and by whom it was applied (`crm-sync apply`'s user, or a dashboard session). */
  apply?: PlanApproval;
  /** The run that applies it, once applied (or being applied). */
  runId?: string;
  /** The nightly sync whose tick made it: its run carries the sync's name. */
  syncName?: string;
  /**
   * The run whose writes it puts back (`runs undo`): its run is an undo run (options.undoOf,
   * linked on that run), applied with every row so skipped ones say why.
   */
  undoOf?: string;
  /** Why the plan is where it is, when something decided it for a person: a held tick, a discard by a newer tick. */
  reason?: string;
  rows: number;
  counts: PlanCounts;
  prediction: PlanPrediction;
  /** The fields the plan writes, in the order first seen (the run's columns after `id`). */
  fields: string[];
  /** How its source file was written (a CSV's delimiter, BOM, line ends): its exports are written the same way. */
  dialect?: DialectFacts;
}

/** One planned field change: the CRM's value when planned (undefined: the CRM does not report it) and the new one. */
export interface PlanChange {
  field: string;
  before?: string;
  after: string;
}

/** One row of a stored plan. */
export interface PlanRow {
  row: number;
  line?: number;
  ref?: string;
  action: PlanAction;
  recordId?: string;
  key?: string;
  /**
   * update: the fields sent (the changed ones, and those the API requires: a required field it
   * does not change holds the CRM's value when planned, which apply's drift check holds the
   * record to); create: every field.
   */
  fields?: Record<string, unknown>;
  /** update: per changed field, the CRM's value when planned (canonical; null when not reported). */
  before?: Record<string, string | null>;
  /** A create's match (`name=Acme`), for the duplicate-safe create. */
  match?: string;
  /** update: the record's place in the CRM's list when planned (0-based), where apply's drift check reads it first. */
  place?: number;
  /** Per field sent as the id(s) a name stood for: the cell's text (`Negotiation`, `VIP; Hot`), so the plan reads `"Negotiation" → stg_…`. */
  names?: Record<string, string>;
  code?: string;
  message?: string;
}

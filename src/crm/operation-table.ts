/**
 * The operation table: every CRM operation crm-sync performs, one entry each. The client, the
 * row decoder, the planner, the worker, verify, the CLI and the dashboard read these entries
 * instead of keeping their own maps. Each operation's body schema is its entry in
 * `OPERATION_FIELDS` (request-bodies.ts); test/crm/operation-table.test.ts walks both.
 * docs/extending.md says how to add an operation.
 *
 * No zod here (type imports only), so the CLI can offer the names as choices without loading
 * the payload schemas.
 */

/** The resources the API lists (and reconcile, verify and drift checks read). */
export const LIST_RESOURCES = ['deals', 'leads', 'contacts'] as const;
export type ListResource = (typeof LIST_RESOURCES)[number];

/**
 * The shape of one row's payload: an update of one record by `id` (`{op, id, fields}`), a
 * create (`{op, fields, match?}`), or an invite, one email per row that the producer groups
 * into batched requests (`{op, email, options}`).
 */
export type RowShape = 'update' | 'create' | 'invite';

export interface OperationEntry {
  /** The resource the operation writes; for a list resource, also the list reconcile and verify page. */
  readonly resource: ListResource | 'team-members';
  /** The request, relative to the API base; `{id}` stands for the record id (spec §4). */
  readonly method: 'POST' | 'PATCH';
  readonly path: string;
  /** The key the request body wraps the fields in (`{deal: {...}}`); none: the fields are the body. */
  readonly wrapper?: string;
  /** Statuses that mean success; default any 2xx. */
  readonly okStatuses?: readonly number[];
  readonly shape: RowShape;
  /** Whether a row can make a new record (duplicate-safe create, verify looks for duplicates). */
  readonly creates: boolean;
  /**
   * Fields an update request may not leave out (spec: `name` on every deal update). When a later
   * row already wrote one, an older row still sends it, with the later row's value.
   */
  readonly updateRequired: readonly string[];
  /** Whether `--reconcile`/`reconcile --op` may plan it (rows matched against the resource's records). */
  readonly reconciles: boolean;
  /** The match key `--match` defaults to when it reconciles; default: its resource's. */
  readonly defaultMatchKey?: string;
  /** What the dashboard and the CLI call a run of it (`Update deals`). */
  readonly words: string;
}

/** A run-level operation that is not a request of its own: its rows are sent as `sendsAs`. */
export interface RunOnlyEntry extends Omit<OperationEntry, 'method' | 'path' | 'wrapper' | 'okStatuses' | 'shape'> {
  readonly resource: ListResource;
  readonly sendsAs: string;
}

/** Per list resource: how rows are compared with records (reconcile, verify, sent digests). */
export interface ResourceEntry {
  /**
   * Row fields that can be compared with a record, in the order the index packs them.
   * Write-only fields (`position`: responses never carry it) are left out.
   */
  readonly comparable: readonly string[];
  /** Keys a record can be matched by, besides `id`. */
  readonly matchKeys: readonly string[];
  /** The key `--match` defaults to. */
  readonly defaultMatchKey: string;
}

export const RESOURCE_TABLE = {
  deals: {
    comparable: ['name', 'value', 'status', 'owner_id', 'stage_id', 'pipeline_id', 'tag_ids'],
    matchKeys: ['unique_number', 'name'],
    defaultMatchKey: 'unique_number',
  },
  leads: {
    comparable: ['name', 'status', 'owner_id', 'tag_ids'],
    matchKeys: ['email', 'unique_number', 'name'],
    defaultMatchKey: 'email',
  },
  contacts: {
    comparable: ['name', 'email', 'phone_number', 'company_id', 'owner_id', 'tag_ids'],
    matchKeys: ['email', 'name', 'phone_number'],
    defaultMatchKey: 'email',
  },
} as const satisfies Record<ListResource, ResourceEntry>;

export const OPERATION_TABLE = {
  'deal.update': {
    resource: 'deals',
    method: 'PATCH',
    path: 'v2/deals/{id}',
    wrapper: 'deal',
    shape: 'update',
    creates: false,
    updateRequired: ['name'],
    reconciles: true,
    words: 'Update deals',
  },
  'deal.create': {
    resource: 'deals',
    method: 'POST',
    path: 'v2/deals',
    wrapper: 'deal',
    // The spec does not fix the status of a create.
    okStatuses: [200, 201],
    shape: 'create',
    creates: true,
    updateRequired: [],
    reconciles: false,
    words: 'Create deals',
  },
  'lead.update': {
    resource: 'leads',
    method: 'PATCH',
    path: 'v2/leads/{id}',
    wrapper: 'lead',
    shape: 'update',
    creates: false,
    updateRequired: [],
    reconciles: true,
    words: 'Update leads',
  },
  'contact.update': {
    resource: 'contacts',
    method: 'PATCH',
    path: 'v2/contacts/{id}',
    wrapper: 'contact',
    shape: 'update',
    creates: false,
    updateRequired: [],
    reconciles: true,
    words: 'Update contacts',
  },
  'team.invite': {
    resource: 'team-members',
    method: 'POST',
    path: 'v2/team-members',
    okStatuses: [200, 201],
    shape: 'invite',
    creates: false,
    updateRequired: [],
    reconciles: false,
    words: 'Invite team members',
  },
  /** A reconciled deal sync: update by key, create what is missing. Rows are sent as deal.update or deal.create. */
  'deal.upsert': {
    resource: 'deals',
    sendsAs: 'deal.update',
    creates: true,
    updateRequired: ['name'],
    reconciles: true,
    defaultMatchKey: 'name',
    words: 'Sync deals',
  },
} as const satisfies Record<string, OperationEntry | RunOnlyEntry>;

type Table = typeof OPERATION_TABLE;
/** What a run does: an operation, or a run-only one (`deal.upsert`). */
export type RunOperation = keyof Table;
/** The operations that are requests: a row payload's `op`, also the BullMQ job name. */
export type Operation = { [K in RunOperation]: Table[K] extends { sendsAs: string } ? never : K }[RunOperation];
/** The operations whose rows update one record by id. */
export type UpdateOperation = { [K in Operation]: Table[K]['shape'] extends 'update' ? K : never }[Operation];
/** What a reconciled run may be: an update operation, or a deal sync that creates what is missing. */
export type ReconcileOperation = { [K in RunOperation]: Table[K]['reconciles'] extends true ? K : never }[RunOperation];

const names = Object.keys(OPERATION_TABLE) as RunOperation[];
const isOperation = (op: RunOperation): op is Operation => !('sendsAs' in OPERATION_TABLE[op]);
const isReconciled = (op: RunOperation): op is ReconcileOperation => OPERATION_TABLE[op].reconciles;

/** Every operation, in the table's order (the order of `--help` and the field table in docs/imports.md). */
export const OPERATIONS = names.filter(isOperation) as unknown as readonly [Operation, ...Operation[]];
export const RUN_OPERATIONS = names as unknown as readonly [RunOperation, ...RunOperation[]];
export const RECONCILE_OPERATIONS = names.filter(isReconciled) as unknown as readonly [
  ReconcileOperation,
  ...ReconcileOperation[],
];

/** The table's entry for a run operation (a run-only one included). */
export function operationEntry(op: RunOperation): OperationEntry | RunOnlyEntry {
  return OPERATION_TABLE[op];
}

/** The operation a run's rows are sent as (`deal.upsert` → `deal.update`). */
export function sendsAs(op: RunOperation): Operation {
  const entry: OperationEntry | RunOnlyEntry = OPERATION_TABLE[op];
  return 'sendsAs' in entry ? (entry.sendsAs as Operation) : (op as Operation);
}

/** The request path of an operation, with the record id filled in. */
export function operationPath(op: Operation, id?: string): string {
  const { path } = OPERATION_TABLE[op];
  if (!path.includes('{id}')) return path;
  if (id === undefined) throw new Error(`${op} needs a record id`);
  return path.replace('{id}', encodeURIComponent(id));
}

/** Keys rows of an update operation can be matched by instead of an id (none for other operations). */
export function idFreeMatchKeys(op: Operation): readonly string[] | undefined {
  const entry = OPERATION_TABLE[op];
  return entry.shape === 'update' ? RESOURCE_TABLE[entry.resource].matchKeys : undefined;
}

/** The match key a reconciled run of `op` defaults to: its own, else its resource's. */
export function defaultMatchKey(op: ReconcileOperation): string {
  const entry: OperationEntry | RunOnlyEntry = OPERATION_TABLE[op];
  return entry.defaultMatchKey ?? RESOURCE_TABLE[OPERATION_TABLE[op].resource].defaultMatchKey;
}

/** The settings a job's row count follows (rowsPerJobOf). */
export interface JobSizes {
  /** Update rows per job (the workspace's `rowsPerJob`). */
  readonly rowsPerJob: number;
  /** Emails per team-members request. */
  readonly inviteBatchSize: number;
}

/**
 * How many rows one job of `op` carries, by its row shape: invites by batch (one team-members
 * request takes many emails), a create alone (a duplicate-safe create holds its job for its
 * look-up), an update `rowsPerJob`. The producer and a retry both size jobs here.
 */
export function rowsPerJobOf(op: Operation, sizes: JobSizes): number {
  switch (OPERATION_TABLE[op].shape) {
    case 'invite':
      return Math.max(1, sizes.inviteBatchSize);
    case 'create':
      return 1;
    case 'update':
      return Math.max(1, sizes.rowsPerJob);
  }
}

/**
 * What a run's rows are, from its operation's entry: the row shape, or `sync` for a run-only
 * operation (a reconciled sync: updates by key and creates of what is missing). Callers branch
 * on this, never on an operation's name, so a new operation of a known shape needs no branch.
 */
export type RunShape = RowShape | 'sync';

export function runShape(op: RunOperation): RunShape {
  const entry: OperationEntry | RunOnlyEntry = OPERATION_TABLE[op];
  return 'sendsAs' in entry ? 'sync' : entry.shape;
}

/** The reconciled sync (`--upsert`) of an operation's resource, if it has one (a deal operation: `deal.upsert`). */
export function syncOf(op: Operation): RunOperation | undefined {
  const { resource } = OPERATION_TABLE[op];
  return RUN_OPERATIONS.find((r) => runShape(r) === 'sync' && OPERATION_TABLE[r].resource === resource);
}

/** The update operation of a run operation's resource (what an undo of its creates writes with). */
export function updateOperationOf(op: RunOperation): UpdateOperation | undefined {
  const { resource } = OPERATION_TABLE[op];
  return OPERATIONS.find(
    (o): o is UpdateOperation => OPERATION_TABLE[o].shape === 'update' && OPERATION_TABLE[o].resource === resource,
  );
}

/** Whether a run operation is run-only (a reconciled sync, `runShape` `sync`), not a request of its own. */
export function isRunOnly(op: RunOperation): op is Exclude<RunOperation, Operation> {
  return runShape(op) === 'sync';
}

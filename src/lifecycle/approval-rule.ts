import { isRunOnly, operationEntry, runShape, syncOf, type RunOperation } from '../crm/index.js';
import { CrmSyncError } from '../errors/index.js';

/*
 * A workspace with `"requireApproval": true` writes to the CRM's records only what a person
 * approved: an applied plan (`plans approve`, then `apply`), a held sync tick approved the same
 * way, an undo plan. What would write values no plan holds — a plain or reconciled `import`, a
 * retry from an edited file (CLI `runs retry --file`, the dashboard's upload) — is refused here,
 * before a run is touched, with the commands that plan, approve and apply it instead
 * (APPROVAL_REQUIRED: exit 2, HTTP 409). One rule, asked by the CLI and the dashboard alike.
 *
 * Not refused: a dry run (it sends nothing); `runs retry` without a file (it sends a run's own
 * stored values again — in such a workspace, what its plan had approved); `team.invite`, which
 * writes no record (no plan, no drift, no undo can hold an invitation).
 */

/** Whether the rule holds writes of this operation (every record write; not invitations). */
export function approvalHolds(op: RunOperation): boolean {
  return runShape(op) !== 'invite';
}

/**
 * The commands that make a plan of `source` for `op` and apply it once approved. `planArgs`: the
 * source and reading options as `crm-sync plan` takes them (`<file> --mapping m.json`).
 */
export function planCommands(op: RunOperation, workspace: string, planArgs: string): string {
  const then = `then crm-sync plans show <planId>, crm-sync plans approve <planId>, crm-sync apply <planId> --wait`;
  // `crm-sync plan` plans what reconcile plans.
  if (operationEntry(op).reconciles) return `crm-sync plan ${planArgs} --op ${op} -w ${workspace}; ${then}`;
  // A create is planned as its resource's sync: a row whose key matches no record is planned as a create.
  const sync = isRunOnly(op) ? op : (syncOf(op) ?? op);
  return (
    `crm-sync plan ${planArgs} --op ${sync} --match unique_number -w ${workspace} ` +
    `(or --match name; a row whose key matches a deal updates it instead of creating a second one); ${then}`
  );
}

/**
 * `import` (plain or `--reconcile`) in a workspace that requires approval: refused, nothing read
 * or sent, unless it is a dry run or writes no record.
 */
export function checkImportApproval(options: {
  workspace: string;
  requireApproval: boolean;
  op: RunOperation;
  dryRun?: boolean;
  /** The source and reading options as `crm-sync plan` takes them. */
  planArgs: string;
}): void {
  if (!options.requireApproval || options.dryRun || !approvalHolds(options.op)) return;
  throw new CrmSyncError(
    'APPROVAL_REQUIRED',
    `workspace "${options.workspace}" requires approval of what is written to its records ("requireApproval": true), ` +
      `and an import writes without one: nothing was read or sent. Make a plan of the file and apply it once approved: ` +
      planCommands(options.op, options.workspace, options.planArgs),
  );
}

/**
 * `runs retry` from a corrected file (CLI `--file`, the dashboard's upload) in a workspace that
 * requires approval: the file's values are values nobody approved, so the retry is refused before
 * the run is touched. A retry without a file sends the run's stored values and is not refused.
 */
export function checkRetryApproval(options: {
  runId: string;
  workspace: string;
  requireApproval: boolean;
  op: RunOperation;
  file: boolean;
}): void {
  if (!options.requireApproval || !options.file || !approvalHolds(options.op)) return;
  throw new CrmSyncError(
    'APPROVAL_REQUIRED',
    `workspace "${options.workspace}" requires approval of what is written to its records ("requireApproval": true): ` +
      `a corrected file's values were not approved, so run ${options.runId} was not retried and nothing was sent. ` +
      `Put the corrections in the source file and plan it (not the export: its crm_sync_ columns and escaped cells are no source): ` +
      `${planCommands(options.op, options.workspace, '<source file>')}. ` +
      `"crm-sync runs retry ${options.runId}" without a file sends the rows' stored values again, as they were approved.`,
  );
}

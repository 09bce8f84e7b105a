import { rowsPerJobOf, type InviteOptions, type InvitePayload, type JobSizes } from '../crm/index.js';
import {
  rowJobId,
  type InviteBatchJobData,
  type InviteRow,
  type QueuedRow,
  type SyncJobData,
  type SyncJobName,
} from '../queue/index.js';

interface InviteBatch {
  op: InvitePayload['op'];
  options: InviteOptions;
  rows: InviteRow[];
}

/** A job ready for the queue, with the number of rows it carries. */
export interface PendingJob {
  name: SyncJobName;
  data: SyncJobData;
  opts: { jobId: string };
  rows: number;
  /** Update and create jobs are ready in row order; invite batches are not. */
  inRowOrder: boolean;
}

/**
 * Groups a run's rows into jobs as the operation table sizes them (rowsPerJobOf): invites in
 * batches of one set of invite options, creates one to a job, updates `rowsPerJob` to a job.
 * Update and create jobs are ready in row order; invite batches fill by options, so they are
 * ready out of order. A job's id is its first row's with the round (`rowJobId`).
 */
export class JobGroups {
  readonly #invites = new Map<string, InviteBatch>();
  // Rows of one operation waiting to fill a job (reconcile mixes creates and updates).
  #open: QueuedRow[] = [];
  #ready: PendingJob[] = [];
  #readyRows = 0;

  constructor(
    private readonly runId: string,
    private readonly generation: number,
    private readonly sizes: JobSizes,
  ) {}

  /** Rows in jobs ready to be queued. */
  get readyRows(): number {
    return this.#readyRows;
  }

  /** An invite row, batched with the rows of the same invite options (`payload`'s). */
  addInvite(row: InviteRow, payload: InvitePayload): void {
    const key = inviteKey(payload.options);
    const batch = this.#invites.get(key) ?? { op: payload.op, options: payload.options, rows: [] };
    batch.rows.push(row);
    this.#invites.set(key, batch);
    if (batch.rows.length >= rowsPerJobOf(batch.op, this.sizes)) {
      this.#pushInvites(batch);
      this.#invites.delete(key);
    }
  }

  addRow(row: QueuedRow): void {
    if (this.#open[0] && this.#open[0].payload.op !== row.payload.op) this.#pushOpen();
    this.#open.push(row);
    if (this.#open.length >= rowsPerJobOf(row.payload.op, this.sizes)) this.#pushOpen();
  }

  /** Closes every group still filling: the source is read to its end. */
  closeAll(): void {
    for (const batch of this.#invites.values()) this.#pushInvites(batch);
    this.#invites.clear();
    this.#pushOpen();
  }

  /** The jobs ready, taken out, with their rows in all. */
  take(): { jobs: PendingJob[]; rows: number } {
    const taken = { jobs: this.#ready, rows: this.#readyRows };
    this.#ready = [];
    this.#readyRows = 0;
    return taken;
  }

  #push(job: PendingJob): void {
    this.#ready.push(job);
    this.#readyRows += job.rows;
  }

  #pushInvites(batch: InviteBatch): void {
    const first = batch.rows[0];
    if (!first) return;
    const data: InviteBatchJobData = { runId: this.runId, rows: batch.rows, options: batch.options };
    this.#push({
      name: batch.op,
      data,
      opts: { jobId: rowJobId(this.runId, first.row, this.generation) },
      rows: batch.rows.length,
      inRowOrder: false,
    });
  }

  #pushOpen(): void {
    const first = this.#open[0];
    if (!first) return;
    this.#push({
      name: first.payload.op,
      data: { runId: this.runId, rows: this.#open },
      opts: { jobId: rowJobId(this.runId, first.row, this.generation) },
      rows: this.#open.length,
      inRowOrder: true,
    });
    this.#open = [];
  }
}

function inviteKey(options: InviteOptions): string {
  return JSON.stringify([
    options.organization_role ?? null,
    options.invited_by ?? null,
    options.send_invitation_email ?? null,
  ]);
}

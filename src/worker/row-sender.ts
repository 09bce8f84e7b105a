import { BadResponseError, CrmError, TransientError, type CrmClient, type ListResource } from '../crm/index.js';
import type { Logger } from '../log/index.js';
import type { QueuedRow, RowPayload } from '../queue/index.js';
import { sentDigest, type DuplicateSafeCreate } from '../reconcile/index.js';
import {
  placeOf,
  succeeded,
  superseded,
  type OrderSettlement,
  type RecordRef,
  type RowFence,
  type RowResult,
  type RowWriter,
} from '../runs/index.js';

/** What sending one row came to. */
export type SendOutcome =
  /** A result for the fenced result writer, and the write order it settles (an applied update). */
  | { kind: 'result'; result: RowResult; settles?: OrderSettlement }
  /** The result is already stored (a create's deal, claim and result go in one step). */
  | { kind: 'recorded'; status: RowResult['status'] }
  /** The row had its result before this attempt: nothing was sent. */
  | { kind: 'has-result' }
  /** The job is no longer this worker's: nothing more may be sent or stored. */
  | { kind: 'lost'; reason: string }
  /** Not now: another write to the record (or an identical create) is on the wire. */
  | { kind: 'wait'; ms: number }
  /** The CRM call failed: the worker's verdict decides (retry, pause, fail). */
  | { kind: 'error'; err: unknown };

export interface RowSenderOptions {
  client: CrmClient;
  fence: RowFence;
  creates: DuplicateSafeCreate;
  logger: Logger;
}

type UpdatePayload = Exclude<RowPayload, { op: 'deal.create' }>;

/** Longest wait before a row blocked by another write to its record looks again. */
const RECHECK_MS = 1000;

const RESOURCE: Record<UpdatePayload['op'], ListResource> = {
  'deal.update': 'deals',
  'lead.update': 'leads',
  'contact.update': 'contacts',
};

/**
 * Sends one queued row through the write fence (docs/architecture.md, "Delivery guarantees"):
 * an update only while its job attempt is current, the row has no result and no later row for
 * its record was applied; a create through the duplicate-safe create. Every request carries
 * the job's abort signal, so losing the job lock cancels it.
 */
export class RowSender {
  constructor(private readonly o: RowSenderOptions) {}

  async send(w: RowWriter, r: QueuedRow, signal: AbortSignal | undefined): Promise<SendOutcome> {
    if (signal?.aborted) return { kind: 'lost', reason: String(signal.reason) };
    const { payload } = r;
    if (payload.op === 'deal.create') {
      let out;
      try {
        out = await this.o.creates.create(w, r, payload.fields, signal, payload.match);
      } catch (err) {
        return signal?.aborted ? { kind: 'lost', reason: String(signal.reason) } : { kind: 'error', err };
      }
      if (out.kind !== 'exists') return out;
      // A concurrent upsert created this key first: this row updates that deal instead.
      this.o.logger.info(
        { runId: w.runId, row: r.row, dealId: out.dealId },
        'another upsert created this deal meanwhile: updating it instead of creating a second one',
      );
      return this.#updateRow(w, r, { op: 'deal.update', id: out.dealId, fields: payload.fields }, signal);
    }
    return this.#updateRow(w, r, payload, signal);
  }

  async #updateRow(
    w: RowWriter,
    r: QueuedRow,
    payload: UpdatePayload,
    signal: AbortSignal | undefined,
  ): Promise<SendOutcome> {
    const record: RecordRef = { resource: RESOURCE[payload.op], id: payload.id };
    const begin = await this.o.fence.beginUpdate(w, record);
    switch (begin.kind) {
      case 'send':
        return this.#update(r, payload, record, begin.seq, signal);
      case 'superseded':
        return { kind: 'result', result: supersededBy(r, begin.by) };
      case 'refused':
        return { kind: 'lost', reason: `refused by the write fence (${begin.reason})` };
      case 'wait':
        // The lease only bounds a write whose worker vanished; most end in milliseconds.
        return { kind: 'wait', ms: Math.min(begin.ms, RECHECK_MS) };
      default:
        return begin;
    }
  }

  async #update(
    r: QueuedRow,
    payload: UpdatePayload,
    record: RecordRef,
    seq: string,
    signal: AbortSignal | undefined,
  ): Promise<SendOutcome> {
    const base = placeOf(r);
    const opts = signal ? { signal } : {};
    const sent = sentDigest(RESOURCE[payload.op], payload.fields);
    // An applied write's lease ends with its result, in the same script call.
    const settles = this.o.fence.settlement(record, seq, true);
    try {
      const id = await updateRecord(this.o.client, payload, opts);
      return { kind: 'result', result: succeeded(base, id, undefined, sent), settles };
    } catch (err) {
      if (err instanceof BadResponseError && err.recordId !== undefined) {
        // A 2xx naming the record: the write happened even though the body is off-spec.
        this.o.logger.warn({ row: r.row, err: err.message }, 'write applied, answer did not match the spec');
        const message = `applied; the CRM's answer did not match the spec (${err.message})`;
        return { kind: 'result', result: succeeded(base, err.recordId, message, sent), settles };
      }
      // A write that may have reached the CRM holds its place in the record's order.
      await this.o.fence.settleUpdate(record, seq, mayHaveApplied(err));
      if (signal?.aborted) return { kind: 'lost', reason: String(signal.reason) };
      return { kind: 'error', err };
    }
  }
}

function mayHaveApplied(err: unknown): boolean {
  if (err instanceof TransientError) return err.maybeCommitted;
  return !(err instanceof CrmError && err.status !== undefined);
}

function updateRecord(client: CrmClient, payload: UpdatePayload, opts: { signal?: AbortSignal }): Promise<string> {
  switch (payload.op) {
    case 'deal.update':
      return client.updateDeal(payload.id, payload.fields, opts).then((d) => d.id);
    case 'lead.update':
      return client.updateLead(payload.id, payload.fields, opts).then((l) => l.id);
    case 'contact.update':
      return client.updateContact(payload.id, payload.fields, opts).then((c) => c.id);
  }
}

/** `by` is the later row's seq (`<runId>#<row base 36>`): say which row in words. */
function supersededBy(r: QueuedRow, by: string): RowResult {
  const [runId = '', row36 = ''] = by.split('#');
  return superseded(
    r,
    `not sent: row ${parseInt(row36, 36)} of run ${runId} wrote this record later and was applied first`,
  );
}

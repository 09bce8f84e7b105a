import type { z } from 'zod';
import { fail, ok, type SimAnswer } from './answer.js';
import { ContactBodySchema, DealBodySchema, LeadBodySchema, describeIssues } from './body-schemas.js';
import { writeContact, writeDeal, writeLead, type WriteResult } from './record-writes.js';
import type { SimResource } from './sim-records.js';
import type { WorkspaceState } from './sim-workspace.js';

function parseBody<T>(schema: z.ZodType<T>, body: unknown): { data: T } | { error: SimAnswer } {
  const result = schema.safeParse(body);
  return result.success ? { data: result.data } : { error: fail(422, describeIssues(result.error)) };
}

function answer<T>(result: WriteResult<T>, status: number, render: (r: T) => unknown): SimAnswer {
  return result.ok ? ok(status, render(result.record), true) : fail(result.status, result.error);
}

/** POST v2/deals: name required (our reading), 201 `{deal}`. */
export function createDeal(ws: WorkspaceState, body: unknown): SimAnswer {
  const parsed = parseBody(DealBodySchema, body);
  if ('error' in parsed) return parsed.error;
  if (parsed.data.deal.name === undefined) return fail(422, 'deal.name is required');
  const result = writeDeal(ws, undefined, parsed.data.deal);
  if (result.ok) ws.stats.writes.dealCreate++;
  return answer(result, 201, (d) => ({ deal: ws.dealJson(d) }));
}

/** PATCH v2/deals/{id}: unknown id → 404 before the body is looked at; `name` is required. */
export function updateDeal(ws: WorkspaceState, id: string, body: unknown): SimAnswer {
  const deal = ws.deals.get(id);
  if (!deal) return fail(404, `Deal not found: ${id}`);
  const parsed = parseBody(DealBodySchema, body);
  if ('error' in parsed) return parsed.error;
  if (parsed.data.deal.name === undefined) return fail(422, 'deal.name is required on every deal update');
  const result = writeDeal(ws, deal, parsed.data.deal);
  if (result.ok) ws.stats.writes.dealUpdate++;
  return answer(result, 200, (d) => ({ deal: ws.dealJson(d) }));
}

export function updateLead(ws: WorkspaceState, id: string, body: unknown): SimAnswer {
  const lead = ws.leads.get(id);
  if (!lead) return fail(404, `Lead not found: ${id}`);
  const parsed = parseBody(LeadBodySchema, body);
  if ('error' in parsed) return parsed.error;
  if (Object.keys(parsed.data.lead).length === 0)
    return fail(422, 'lead: needs at least one of name, status, owner_id, tag_ids');
  const result = writeLead(ws, lead, parsed.data.lead);
  if (result.ok) ws.stats.writes.leadUpdate++;
  return answer(result, 200, (l) => ({ lead: ws.leadJson(l) }));
}

export function updateContact(ws: WorkspaceState, id: string, body: unknown): SimAnswer {
  const contact = ws.contacts.get(id);
  if (!contact) return fail(404, `Contact not found: ${id}`);
  const parsed = parseBody(ContactBodySchema, body);
  if ('error' in parsed) return parsed.error;
  if (Object.keys(parsed.data.contact).length === 0) {
    return fail(422, 'contact: needs at least one of name, email, phone_number, company_id, owner_id, tag_ids');
  }
  const result = writeContact(ws, contact, parsed.data.contact);
  if (result.ok) ws.stats.writes.contactUpdate++;
  return answer(result, 200, (c) => ({ contact: ws.contactJson(c) }));
}

/** Our reading of the unstated maximum page size. */
export const MAX_PAGE_SIZE = 100;
export const DEFAULT_PAGE_SIZE = 30;

function intParam(query: Record<string, unknown>, name: string, fallback: number, max: number): number | string {
  const raw = query[name];
  if (raw === undefined) return fallback;
  if (typeof raw !== 'string' || !/^\d+$/.test(raw)) return `${name}: must be a positive integer`;
  const n = Number(raw);
  if (n < 1 || n > max) return `${name}: must be between 1 and ${max}`;
  return n;
}

/** GET v1|v2/{resource}: creation order, so records added while a client pages land on later pages. */
export function listRecords(ws: WorkspaceState, resource: SimResource, query: Record<string, unknown>): SimAnswer {
  const page = intParam(query, 'page_number', 1, Number.MAX_SAFE_INTEGER);
  const size = intParam(query, 'page_size', DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE);
  if (typeof page === 'string') return fail(422, page);
  if (typeof size === 'string') return fail(422, size);
  const all = ws.ordered(resource);
  const total = all.length;
  const start = (page - 1) * size;
  const items = all.slice(start, start + size).map((record) => render(ws, resource, record));
  ws.stats.listPages++;
  return ok(
    200,
    {
      [resource]: items,
      pagination: {
        total_records: total,
        current_page_number: page,
        total_pages: Math.ceil(total / size),
        page_size: size,
      },
    },
    false,
  );
}

function render(ws: WorkspaceState, resource: SimResource, record: object): unknown {
  // The map was chosen by `resource`, so the record has that resource's type.
  if (resource === 'deals') return ws.dealJson(record as Parameters<typeof ws.dealJson>[0]);
  if (resource === 'leads') return ws.leadJson(record as Parameters<typeof ws.leadJson>[0]);
  return ws.contactJson(record as Parameters<typeof ws.contactJson>[0]);
}

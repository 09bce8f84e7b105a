import type { DealFields, DirectContactFields, DirectDealFields, DirectLeadFields } from './body-schemas.js';
import type {
  SimCompany,
  SimContact,
  SimDeal,
  SimLead,
  SimOwner,
  SimPipeline,
  SimStage,
  SimTag,
} from './sim-records.js';

/** What the write rules need to see of a workspace. */
export interface WorkspaceData {
  readonly deals: Map<string, SimDeal>;
  readonly leads: Map<string, SimLead>;
  readonly contacts: Map<string, SimContact>;
  readonly ownerById: ReadonlyMap<string, SimOwner>;
  readonly pipelineById: ReadonlyMap<string, SimPipeline>;
  readonly stageById: ReadonlyMap<string, SimStage>;
  readonly tagById: ReadonlyMap<string, SimTag>;
  readonly companyById: ReadonlyMap<string, SimCompany>;
  /** Lower-cased contact email → contact id: emails are unique per workspace. */
  readonly contactByEmail: Map<string, string>;
  newId(prefix: string): string;
  nextUniqueNumber(kind: 'deal' | 'lead'): string;
  /** An ISO timestamp strictly later than `previous` and than any earlier stamp. */
  stamp(previous?: string): string;
  /** Store names and emails normalised (SimWorkspaceOptions.normalise). */
  readonly normalise: boolean;
}

/** A write's fields as a normalising CRM stores them: a name's whitespace collapsed, an email's domain lower-cased. */
function stored<F extends { name?: string | undefined; email?: string | undefined }>(data: WorkspaceData, f: F): F {
  if (!data.normalise) return f;
  const out = { ...f };
  if (typeof out.name === 'string') out.name = out.name.trim().replace(/\s+/g, ' ');
  if (typeof out.email === 'string') {
    const at = out.email.lastIndexOf('@');
    if (at > 0) out.email = out.email.slice(0, at) + out.email.slice(at).toLowerCase();
  }
  return out;
}

/** A write either applies (and returns the record) or is refused with the HTTP status it earns. */
export type WriteResult<T> = { ok: true; record: T } | { ok: false; status: 404 | 422; error: string };

const refused = (error: string): { ok: false; status: 422; error: string } => ({ ok: false, status: 422, error });

/**
 * An update of an existing record, as the CRM does every kind alike: the sent fields replace
 * the record's, tags are kept once each, and updated_at moves on.
 */
function updated<T extends { tag_ids: string[]; updated_at: string }>(
  data: WorkspaceData,
  existing: T,
  tagIds: string[] | undefined,
  ...fields: Array<Partial<T>>
): WriteResult<T> {
  Object.assign(existing, ...fields);
  if (tagIds) existing.tag_ids = [...new Set(tagIds)];
  existing.updated_at = data.stamp(existing.updated_at);
  return { ok: true, record: existing };
}

function checkRefs(
  data: WorkspaceData,
  prefix: string,
  f: {
    owner_id?: string | undefined;
    tag_ids?: string[] | undefined;
    company_id?: string | null | undefined;
    contact_id?: string | null | undefined;
  },
): string | null {
  const problems: string[] = [];
  if (f.owner_id !== undefined && !data.ownerById.has(f.owner_id))
    problems.push(`${prefix}.owner_id: no owner with id "${f.owner_id}"`);
  if (f.tag_ids !== undefined) {
    const unknown = f.tag_ids.filter((id) => !data.tagById.has(id));
    if (unknown.length > 0)
      problems.push(`${prefix}.tag_ids: no tag with id ${unknown.map((id) => `"${id}"`).join(', ')}`);
  }
  if (typeof f.company_id === 'string' && !data.companyById.has(f.company_id)) {
    problems.push(`${prefix}.company_id: no company with id "${f.company_id}"`);
  }
  if (typeof f.contact_id === 'string' && !data.contacts.has(f.contact_id)) {
    problems.push(`${prefix}.contact_id: no contact with id "${f.contact_id}"`);
  }
  return problems.length > 0 ? problems.join('; ') : null;
}

/** Pipeline and stage move together: a stage implies its pipeline, a new pipeline starts at its first stage. */
function resolveStage(
  data: WorkspaceData,
  current: { pipeline_id: string | null; stage_id: string | null },
  f: Pick<DealFields, 'pipeline_id' | 'stage_id'>,
): { pipeline_id: string | null; stage_id: string | null } | string {
  if (f.pipeline_id !== undefined && !data.pipelineById.has(f.pipeline_id))
    return `deal.pipeline_id: no pipeline with id "${f.pipeline_id}"`;
  if (f.stage_id !== undefined) {
    const stage = data.stageById.get(f.stage_id);
    if (!stage) return `deal.stage_id: no stage with id "${f.stage_id}"`;
    if (f.pipeline_id !== undefined && stage.pipelineId !== f.pipeline_id) {
      return `deal.stage_id: stage "${f.stage_id}" does not belong to pipeline "${f.pipeline_id}"`;
    }
    return { pipeline_id: stage.pipelineId, stage_id: stage.id };
  }
  if (f.pipeline_id !== undefined) {
    const stage = data.stageById.get(current.stage_id ?? '');
    if (stage?.pipelineId === f.pipeline_id) return { pipeline_id: f.pipeline_id, stage_id: stage.id };
    const first = [...data.stageById.values()].find((s) => s.pipelineId === f.pipeline_id);
    return { pipeline_id: f.pipeline_id, stage_id: first?.id ?? null };
  }
  return current;
}

/** Creates (existing = undefined) or updates a deal. */
export function writeDeal(
  data: WorkspaceData,
  existing: SimDeal | undefined,
  fields: DirectDealFields,
): WriteResult<SimDeal> {
  const f = stored(data, fields);
  const problem = checkRefs(data, 'deal', f);
  if (problem) return refused(problem);
  const current = existing ?? { pipeline_id: null, stage_id: null };
  const placement = resolveStage(data, current, f);
  if (typeof placement === 'string') return refused(placement);
  if (!existing) {
    if (f.name === undefined) return refused('deal.name: is required');
    const created_at = data.stamp();
    const contact = f.contact_id ? data.contacts.get(f.contact_id) : undefined;
    const deal: SimDeal = {
      id: data.newId('del_'),
      name: f.name,
      status: f.status ?? 'in_progress',
      // Not a setting: the CRM stores a deal created without a value as 0 (as status and currency below).
      value: f.value ?? 0,
      currency: f.currency ?? 'USD',
      unique_number: data.nextUniqueNumber('deal'),
      contact_id: f.contact_id ?? null,
      company_id: f.company_id !== undefined ? f.company_id : (contact?.company_id ?? null),
      owner_id: f.owner_id ?? null,
      ...placement,
      position: f.position ?? null,
      tag_ids: f.tag_ids ? [...new Set(f.tag_ids)] : [],
      created_at,
      updated_at: created_at,
    };
    data.deals.set(deal.id, deal);
    return { ok: true, record: deal };
  }
  const { tag_ids, pipeline_id: _p, stage_id: _s, ...rest } = f;
  return updated(data, existing, tag_ids, rest, placement);
}

export function writeLead(
  data: WorkspaceData,
  existing: SimLead | undefined,
  fields: DirectLeadFields,
): WriteResult<SimLead> {
  const f = stored(data, fields);
  const problem = checkRefs(data, 'lead', f);
  if (problem) return refused(problem);
  if (!existing) {
    if (f.name === undefined) return refused('lead.name: is required');
    const contact = f.contact_id ? data.contacts.get(f.contact_id) : undefined;
    const created_at = data.stamp();
    const lead: SimLead = {
      id: data.newId('led_'),
      name: f.name,
      status: f.status ?? 'open',
      unique_number: data.nextUniqueNumber('lead'),
      contact_id: f.contact_id ?? null,
      company_id: f.company_id !== undefined ? f.company_id : (contact?.company_id ?? null),
      owner_id: f.owner_id ?? null,
      tag_ids: f.tag_ids ? [...new Set(f.tag_ids)] : [],
      created_at,
      updated_at: created_at,
    };
    data.leads.set(lead.id, lead);
    return { ok: true, record: lead };
  }
  const { tag_ids, ...rest } = f;
  return updated(data, existing, tag_ids, rest);
}

export function writeContact(
  data: WorkspaceData,
  existing: SimContact | undefined,
  fields: DirectContactFields,
): WriteResult<SimContact> {
  const f = stored(data, fields);
  const problem = checkRefs(data, 'contact', f);
  if (problem) return refused(problem);
  if (f.email !== undefined) {
    const holder = data.contactByEmail.get(f.email.toLowerCase());
    if (holder !== undefined && holder !== existing?.id)
      return refused(`contact.email: "${f.email}" is already used by another contact`);
  }
  if (!existing) {
    if (f.name === undefined || f.email === undefined) return refused('contact.name and contact.email: are required');
    const created_at = data.stamp();
    const contact: SimContact = {
      id: data.newId('con_'),
      name: f.name,
      email: f.email,
      phone_number: f.phone_number ?? '',
      company_id: f.company_id ?? null,
      owner_id: f.owner_id ?? null,
      tag_ids: f.tag_ids ? [...new Set(f.tag_ids)] : [],
      created_at,
      updated_at: created_at,
    };
    data.contacts.set(contact.id, contact);
    data.contactByEmail.set(contact.email.toLowerCase(), contact.id);
    return { ok: true, record: contact };
  }
  const { tag_ids, ...rest } = f;
  if (f.email !== undefined) {
    data.contactByEmail.delete(existing.email.toLowerCase());
    data.contactByEmail.set(f.email.toLowerCase(), existing.id);
  }
  return updated(data, existing, tag_ids, rest);
}

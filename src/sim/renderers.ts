import type { WorkspaceData } from './record-writes.js';
import type { SimContact, SimDeal, SimLead } from './sim-records.js';

/** Spec §2 answer shapes, built from the internal records at answer time. */

export interface RefJson {
  id: string;
  name: string;
}
export interface TagJson {
  id: string;
  name: string;
  style: string;
}

export interface DealJson {
  id: string;
  name: string;
  status: string;
  value: number;
  currency: string;
  price: string;
  unique_number: string;
  contact: RefJson | null;
  company: RefJson | null;
  owner: string | null;
  pipeline: RefJson | null;
  stage: RefJson | null;
  tags: TagJson[];
  created_at: string;
  updated_at: string;
}
export interface LeadJson {
  id: string;
  name: string;
  status: string;
  unique_number: string;
  email: string;
  phone_number: string;
  contact: { id: string | null; name: string };
  company: { id: string | null; name: string | null };
  owner: string | null;
  tags: TagJson[];
  created_at: string;
  updated_at: string;
}
export interface ContactJson {
  id: string;
  name: string;
  email: string;
  phone_number: string;
  created_at: string;
  updated_at: string;
  owner: string | null;
  tags: TagJson[];
  company: { id: string | null; name: string | null };
}

const formats = new Map<string, Intl.NumberFormat>();

/** "$1,250.00" from 1250 + USD; an unknown currency code falls back to "XYZ 1,250.00". */
export function formatPrice(value: number, currency: string): string {
  let format = formats.get(currency);
  if (!format) {
    try {
      format = new Intl.NumberFormat('en-US', { style: 'currency', currency });
    } catch {
      format = new Intl.NumberFormat('en-US', { minimumFractionDigits: 2, maximumFractionDigits: 2 });
      return `${currency} ${format.format(value)}`;
    }
    formats.set(currency, format);
  }
  return format.format(value);
}

function tags(data: WorkspaceData, ids: string[]): TagJson[] {
  return ids.flatMap((id) => {
    const tag = data.tagById.get(id);
    return tag ? [{ id: tag.id, name: tag.name, style: tag.style }] : [];
  });
}

function ref(map: ReadonlyMap<string, { id: string; name: string }>, id: string | null): RefJson | null {
  const found = id === null ? undefined : map.get(id);
  return found ? { id: found.id, name: found.name } : null;
}

function company(data: WorkspaceData, id: string | null): { id: string | null; name: string | null } {
  return ref(data.companyById, id) ?? { id: null, name: null };
}

export function dealJson(data: WorkspaceData, d: SimDeal): DealJson {
  return {
    id: d.id,
    name: d.name,
    status: d.status,
    value: d.value,
    currency: d.currency,
    price: formatPrice(d.value, d.currency),
    unique_number: d.unique_number,
    contact: ref(data.contacts, d.contact_id),
    company: ref(data.companyById, d.company_id),
    owner: d.owner_id,
    pipeline: ref(data.pipelineById, d.pipeline_id),
    stage: ref(data.stageById, d.stage_id),
    tags: tags(data, d.tag_ids),
    created_at: d.created_at,
    updated_at: d.updated_at,
  };
}

export function leadJson(data: WorkspaceData, l: SimLead): LeadJson {
  const contact = l.contact_id === null ? undefined : data.contacts.get(l.contact_id);
  return {
    id: l.id,
    name: l.name,
    status: l.status,
    unique_number: l.unique_number,
    email: contact?.email ?? '',
    phone_number: contact?.phone_number ?? '',
    contact: { id: contact?.id ?? null, name: contact?.name ?? l.name },
    company: company(data, l.company_id),
    owner: l.owner_id,
    tags: tags(data, l.tag_ids),
    created_at: l.created_at,
    updated_at: l.updated_at,
  };
}

export function contactJson(data: WorkspaceData, c: SimContact): ContactJson {
  return {
    id: c.id,
    name: c.name,
    email: c.email,
    phone_number: c.phone_number,
    created_at: c.created_at,
    updated_at: c.updated_at,
    owner: c.owner_id,
    tags: tags(data, c.tag_ids),
    company: company(data, c.company_id),
  };
}

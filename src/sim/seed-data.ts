import { Prng, streamSeed } from './prng.js';
import {
  COMPANY_NAMES,
  CURRENCIES,
  DEAL_PRODUCTS,
  FIRST_NAMES,
  FREEMAIL_DOMAINS,
  LAST_NAMES,
  PIPELINES,
  TAGS,
  slug,
} from './seed-names.js';
import type {
  SimContact,
  SimDeal,
  SimDealStatus,
  SimLead,
  SimLeadStatus,
  SimOwner,
  SimReferenceData,
} from './sim-records.js';

/** Seed timestamps start here and advance a little per record, so they are the same on every run. */
const EPOCH = Date.UTC(2024, 0, 1);
const OWNER_COUNT = 8;

export interface SeedData extends SimReferenceData {
  contacts: SimContact[];
  leads: SimLead[];
  deals: SimDeal[];
}

/**
 * Makes `base` unique by a numeric suffix. Remembers the last suffix per base so that many
 * collisions (100k deals over a few hundred name stems) stay linear.
 */
/** The first repeat of a name is its second: `Acme`, then `Acme 2`. */
const FIRST_SUFFIX = 2;

function uniquifier(format: (base: string, n: number) => string): (base: string) => string {
  const taken = new Set<string>();
  const next = new Map<string, number>();
  return (base) => {
    let candidate = base;
    for (let n = next.get(base) ?? FIRST_SUFFIX; taken.has(candidate); n++) {
      candidate = format(base, n);
      next.set(base, n + 1);
    }
    taken.add(candidate);
    return candidate;
  };
}

/** 80 random bits per id: a collision among even millions of seeded records is not a practical concern. */
function newId(prng: Prng, prefix: string): string {
  return prefix + prng.hex(20);
}

function reference(seed: number, pipelineNames: SeedPipelines = PIPELINES): SimReferenceData {
  const prng = new Prng(streamSeed(seed, 'reference'));
  const owners: SimOwner[] = [];
  const ownerNames = new Set<string>();
  while (owners.length < OWNER_COUNT) {
    const first = prng.pick(FIRST_NAMES);
    const last = prng.pick(LAST_NAMES);
    const name = `${first} ${last}`;
    if (ownerNames.has(name)) continue;
    ownerNames.add(name);
    owners.push({ id: newId(prng, 'usr_'), name, email: `${slug(first)}.${slug(last)}@crm-team.example` });
  }
  const pipelines = pipelineNames.map((p) => ({ id: newId(prng, 'pip_'), name: p.name }));
  const stages = pipelineNames.flatMap((p, i) =>
    p.stages.map((name) => ({ id: newId(prng, 'stg_'), name, pipelineId: pipelines[i]?.id ?? '' })),
  );
  const tags = TAGS.map((t) => ({ id: newId(prng, 'tag_'), name: t.name, style: t.style }));
  const companies = COMPANY_NAMES.map((name) => ({ id: newId(prng, 'cmp_'), name, domain: `${slug(name)}.example` }));
  return { owners, pipelines, stages, tags, companies };
}

/** Advancing clock for seed timestamps: a few minutes per record. */
function seedClock(prng: Prng): () => { created: string; updated: string } {
  let t = EPOCH;
  return () => {
    t += prng.int(1, 300) * 1000;
    const updated = t + prng.int(0, 30 * 24 * 3600) * 1000;
    return { created: new Date(t).toISOString(), updated: new Date(updated).toISOString() };
  };
}

function contacts(seed: number, count: number, ref: SimReferenceData): SimContact[] {
  const prng = new Prng(streamSeed(seed, 'contacts'));
  const clock = seedClock(prng);
  // The suffix goes on the local part: jane.doe2@acme.example.
  const uniqueEmail = uniquifier((base, n) => base.replace('@', `${n}@`));
  const out: SimContact[] = [];
  for (let i = 0; i < count; i++) {
    const first = prng.pick(FIRST_NAMES);
    const last = prng.pick(LAST_NAMES);
    const company = prng.chance(0.85) ? prng.pick(ref.companies) : null;
    const domain = company ? company.domain : prng.pick(FREEMAIL_DOMAINS);
    const email = uniqueEmail(`${slug(first)}.${slug(last)}@${domain}`);
    const phone = prng.chance(0.1) ? '' : `+1 ${prng.int(201, 989)}-555-${String(prng.int(0, 9999)).padStart(4, '0')}`;
    const { created, updated } = clock();
    out.push({
      id: newId(prng, 'con_'),
      name: `${first} ${last}`,
      email,
      phone_number: phone,
      company_id: company?.id ?? null,
      owner_id: prng.chance(0.95) ? prng.pick(ref.owners).id : null,
      tag_ids: prng.sample(ref.tags, prng.int(0, 3)).map((t) => t.id),
      created_at: created,
      updated_at: updated,
    });
  }
  return out;
}

function leads(seed: number, contactList: SimContact[], ref: SimReferenceData): SimLead[] {
  const prng = new Prng(streamSeed(seed, 'leads'));
  const clock = seedClock(prng);
  const statuses: SimLeadStatus[] = ['open', 'open', 'open', 'open', 'converted', 'converted', 'archived'];
  // One lead per contact: a lead's email comes from its contact, so lead emails stay unique too.
  return contactList.map((contact, i) => {
    const { created, updated } = clock();
    return {
      id: newId(prng, 'led_'),
      name: contact.name,
      status: prng.pick(statuses),
      unique_number: `L-${String(i + 1).padStart(6, '0')}`,
      contact_id: contact.id,
      company_id: contact.company_id,
      owner_id: prng.chance(0.95) ? prng.pick(ref.owners).id : null,
      tag_ids: prng.sample(ref.tags, prng.int(0, 3)).map((t) => t.id),
      created_at: created,
      updated_at: updated,
    };
  });
}

function deals(seed: number, count: number, contactList: SimContact[], ref: SimReferenceData): SimDeal[] {
  const prng = new Prng(streamSeed(seed, 'deals'));
  const clock = seedClock(prng);
  const statuses: SimDealStatus[] = ['in_progress', 'in_progress', 'in_progress', 'won', 'won', 'lost'];
  const uniqueName = uniquifier((base, n) => `${base} #${n}`);
  const out: SimDeal[] = [];
  for (let i = 0; i < count; i++) {
    const contact = contactList.length > 0 && prng.chance(0.9) ? prng.pick(contactList) : null;
    const companyId = contact ? contact.company_id : prng.pick(ref.companies).id;
    const companyName = ref.companies.find((c) => c.id === companyId)?.name ?? contact?.name ?? 'Unknown';
    const name = uniqueName(`${companyName} - ${prng.pick(DEAL_PRODUCTS)}`);
    const pipeline = prng.pick(ref.pipelines);
    const stage = prng.pick(ref.stages.filter((s) => s.pipelineId === pipeline.id));
    const { created, updated } = clock();
    out.push({
      id: newId(prng, 'del_'),
      name,
      status: prng.pick(statuses),
      value: prng.int(5, 2000) * 50,
      currency: prng.pick(CURRENCIES),
      unique_number: `D-${String(i + 1).padStart(6, '0')}`,
      contact_id: contact?.id ?? null,
      company_id: companyId,
      owner_id: prng.chance(0.95) ? prng.pick(ref.owners).id : null,
      pipeline_id: pipeline.id,
      stage_id: stage.id,
      position: prng.int(0, 100),
      tag_ids: prng.sample(ref.tags, prng.int(0, 3)).map((t) => t.id),
      created_at: created,
      updated_at: updated,
    });
  }
  return out;
}

/** The whole seed of one workspace: a pure function of (seed, records). */
/** Pipelines and their stage names, as a workspace is seeded (default PIPELINES). */
export type SeedPipelines = ReadonlyArray<{ name: string; stages: readonly string[] }>;

export function generateSeedData(seed: number, records: number, pipelines?: SeedPipelines): SeedData {
  const ref = reference(seed, pipelines);
  const contactList = contacts(seed, records, ref);
  return {
    ...ref,
    contacts: contactList,
    leads: leads(seed, contactList, ref),
    deals: deals(seed, records, contactList, ref),
  };
}

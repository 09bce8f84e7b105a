import { z } from 'zod';
import { tagIdOf, tagNameOf, type ListResource } from '../crm/index.js';

/*
 * The names a workspace's records show beside their references: pipelines with their stages,
 * tags, companies. The API has no list of pipelines, tags or companies (the spec lists deals,
 * leads and contacts only), so what is known is what the records carry: a deal's
 * `pipeline {id,name}`, `stage {id,name}`, `company {id,name}` and `tags [{id,name}]`, a
 * contact's and a lead's `company` and `tags`. A stage no deal is in, a tag no record wears,
 * cannot be known here (docs/names.md says so, and so does every REFERENCE_UNKNOWN).
 */

/** What a mapping column may name by name. */
export const REFERENCE_KINDS = ['pipeline', 'stage', 'tag', 'company'] as const;
export type ReferenceKind = (typeof REFERENCE_KINDS)[number];

/** The API field that takes each kind's id. */
export const REFERENCE_FIELDS: Readonly<Record<string, ReferenceKind>> = {
  pipeline_id: 'pipeline',
  stage_id: 'stage',
  tag_ids: 'tag',
  company_id: 'company',
};

/** Which lists show which kinds (a contact's or lead's record has no pipeline or stage). */
export const KINDS_OF_LIST: Readonly<Record<ListResource, readonly ReferenceKind[]>> = {
  deals: ['pipeline', 'stage', 'tag', 'company'],
  contacts: ['tag', 'company'],
  leads: ['tag', 'company'],
};

const Entry = z.object({ id: z.string(), name: z.string() });
const StageEntry = Entry.extend({ pipelineId: z.string() });

/** One list pass's references as Redis keeps them (ReferenceStore), with when the pass began. */
export const ReferencePassSchema = z.object({
  list: z.enum(['deals', 'contacts', 'leads']),
  readAtMs: z.number(),
  pipelines: z.array(Entry),
  stages: z.array(StageEntry),
  tags: z.array(Entry),
  companies: z.array(Entry),
});
export type ReferencePass = z.infer<typeof ReferencePassSchema>;
export type ReferenceEntry = z.infer<typeof Entry>;
export type StageReference = z.infer<typeof StageEntry>;

/** Names as people type them compare equal: trimmed, spaces collapsed, case folded, NFKC (`ﬁ` is `fi`, a full-width `Ｖ` is `V`). */
export function normaliseReferenceName(name: string): string {
  return name.normalize('NFKC').trim().replace(/\s+/g, ' ').toLowerCase();
}

function refOf(value: unknown): ReferenceEntry | undefined {
  if (value === null || typeof value !== 'object') return undefined;
  const { id, name } = value as { id?: unknown; name?: unknown };
  return typeof id === 'string' && id !== '' && typeof name === 'string' ? { id, name } : undefined;
}

/** Collects one list pass's references as its pages go by (a page each time, never a request of its own). */
export class ReferenceCollector {
  readonly list: ListResource;
  readonly readAtMs: number;
  readonly #pipelines = new Map<string, string>();
  readonly #stages = new Map<string, StageReference>();
  readonly #tags = new Map<string, string>();
  readonly #companies = new Map<string, string>();

  constructor(list: ListResource, readAtMs = Date.now()) {
    this.list = list;
    this.readAtMs = readAtMs;
  }

  add(record: object): void {
    const r = record as Record<string, unknown>;
    const company = refOf(r.company);
    if (company) this.#companies.set(company.id, company.name);
    if (Array.isArray(r.tags))
      for (const tag of r.tags) {
        const id = tagIdOf(tag);
        const name = tagNameOf(tag);
        if (id !== undefined && id !== '' && name !== undefined) this.#tags.set(id, name);
      }
    if (this.list !== 'deals') return;
    const pipeline = refOf(r.pipeline);
    if (pipeline) this.#pipelines.set(pipeline.id, pipeline.name);
    const stage = refOf(r.stage);
    // A stage belongs to the pipeline its deal is in (the CRM moves them together).
    if (stage && pipeline) this.#stages.set(stage.id, { ...stage, pipelineId: pipeline.id });
  }

  pass(): ReferencePass {
    const entries = (m: Map<string, string>) => [...m].map(([id, name]) => ({ id, name }));
    return {
      list: this.list,
      readAtMs: this.readAtMs,
      pipelines: entries(this.#pipelines),
      stages: [...this.#stages.values()],
      tags: entries(this.#tags),
      companies: entries(this.#companies),
    };
  }
}

/** How a name resolves: one id, none (with the nearest names to offer), or several. */
export type Resolution =
  | { kind: 'found'; id: string; name: string }
  | { kind: 'unknown'; names: string[]; elsewhere?: ReferenceEntry[] }
  | { kind: 'ambiguous'; candidates: Array<ReferenceEntry & { pipeline?: string }> };

/**
 * The workspace's references, merged from list passes (the newest pass's name wins for an id
 * two passes show: a stage renamed since the older one). Read-only once built.
 */
export class ReferenceIndex {
  /** The passes it was built from, oldest first. */
  readonly passes: readonly ReferencePass[];
  readonly #byKind = new Map<ReferenceKind, Map<string, ReferenceEntry & { pipelineId?: string }>>();
  readonly #byName = new Map<ReferenceKind, Map<string, string[]>>();

  constructor(passes: readonly ReferencePass[]) {
    this.passes = [...passes].sort((a, b) => a.readAtMs - b.readAtMs);
    for (const kind of REFERENCE_KINDS) this.#byKind.set(kind, new Map());
    for (const pass of this.passes) {
      for (const p of pass.pipelines) this.#byKind.get('pipeline')!.set(p.id, p);
      for (const s of pass.stages) this.#byKind.get('stage')!.set(s.id, s);
      for (const t of pass.tags) this.#byKind.get('tag')!.set(t.id, t);
      for (const c of pass.companies) this.#byKind.get('company')!.set(c.id, c);
    }
    for (const kind of REFERENCE_KINDS) {
      const names = new Map<string, string[]>();
      for (const entry of this.#byKind.get(kind)!.values()) {
        const key = normaliseReferenceName(entry.name);
        names.set(key, [...(names.get(key) ?? []), entry.id]);
      }
      this.#byName.set(kind, names);
    }
  }

  /** When the oldest pass it holds began (epoch ms); undefined when it holds none. */
  get readAtMs(): number | undefined {
    return this.passes[0]?.readAtMs;
  }

  entries(kind: ReferenceKind): Array<ReferenceEntry & { pipelineId?: string }> {
    return [...this.#byKind.get(kind)!.values()];
  }

  has(kind: ReferenceKind, id: string): boolean {
    return this.#byKind.get(kind)!.has(id);
  }

  /** Whether a cell is an id of `kind` as resolve takes one (sent as it is, not looked up as a name). */
  isId(kind: ReferenceKind, cell: string): boolean {
    return this.#own(kind, cell) !== undefined;
  }

  #own(kind: ReferenceKind, cell: string): (ReferenceEntry & { pipelineId?: string }) | undefined {
    return this.#byKind.get(kind)!.get(cell.trim());
  }

  nameOf(kind: ReferenceKind, id: string): string | undefined {
    return this.#byKind.get(kind)!.get(id)?.name;
  }

  pipelineOf(stageId: string): string | undefined {
    return this.#byKind.get('stage')!.get(stageId)?.pipelineId;
  }

  /**
   * A cell → the id it stands for. An id of that kind passes as it is; otherwise the name is
   * looked up (normaliseReferenceName). A stage is looked for in `pipelineId` when the row has
   * one (its other pipelines' stages of that name are `elsewhere`), otherwise in every
   * pipeline: a name two pipelines use is ambiguous.
   */
  resolve(kind: ReferenceKind, cell: string, pipelineId?: string): Resolution {
    const byId = this.#byKind.get(kind)!;
    const own = this.#own(kind, cell);
    if (own && (kind !== 'stage' || pipelineId === undefined || own.pipelineId === pipelineId))
      return { kind: 'found', id: own.id, name: own.name };
    let ids = this.#byName.get(kind)!.get(normaliseReferenceName(cell)) ?? [];
    let elsewhere: ReferenceEntry[] = [];
    let pool = [...byId.values()];
    if (kind === 'stage' && pipelineId !== undefined) {
      const inPipeline = ids.filter((id) => byId.get(id)?.pipelineId === pipelineId);
      elsewhere = ids.filter((id) => !inPipeline.includes(id)).map((id) => this.#entry(kind, id));
      if (own && own.pipelineId !== pipelineId) elsewhere.push(own);
      ids = inPipeline;
      pool = pool.filter((s) => s.pipelineId === pipelineId);
    }
    if (ids.length === 1) {
      const entry = this.#entry(kind, ids[0]!);
      return { kind: 'found', id: entry.id, name: entry.name };
    }
    if (ids.length > 1)
      return {
        kind: 'ambiguous',
        candidates: ids.map((id) => {
          const entry = byId.get(id)!;
          const pipeline = entry.pipelineId !== undefined ? this.nameOf('pipeline', entry.pipelineId) : undefined;
          return { id, name: entry.name, ...(pipeline !== undefined ? { pipeline } : {}) };
        }),
      };
    return {
      kind: 'unknown',
      names: [...new Set(pool.map((e) => e.name))],
      ...(elsewhere.length > 0 ? { elsewhere } : {}),
    };
  }

  #entry(kind: ReferenceKind, id: string): ReferenceEntry {
    const entry = this.#byKind.get(kind)!.get(id)!;
    return { id: entry.id, name: entry.name };
  }
}

/** One token holding a digit: `stg_1cbb…`, `4711`, a UUID. Names are words: "Negotiation", "Closed Won", "VIP". */
const ID_SHAPE = /^(?=\S*\p{N})[\p{L}\p{N}_.:-]+$/u;

/**
 * Whether a cell reads as a name rather than an id of `kind`, before any row is resolved (the
 * mapping table's "holds names" suggestion). The index decides when it knows the cell: an id
 * resolve sends as it is (isId), or a name it resolves. A cell it does not know (no pass read yet,
 * or a record no pass saw) has only its shape to go by, the API's ids being opaque strings of no
 * stated form: one token holding a digit reads as an id, anything else as a name.
 */
export function readsAsName(kind: ReferenceKind, cell: string, index?: ReferenceIndex): boolean {
  const text = cell.trim();
  if (text === '' || index?.isId(kind, text) === true) return false;
  if (index !== undefined && index.resolve(kind, text).kind !== 'unknown') return true;
  return !ID_SHAPE.test(text);
}

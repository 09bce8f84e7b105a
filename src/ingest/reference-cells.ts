import { normaliseReferenceName, type ReferenceIndex, type ReferenceKind } from '../references/index.js';
import { nearest } from './did-you-mean.js';
import type { FieldError } from './field-error.js';
import type { ColumnRule } from './mapping.js';

/** A cell turned into an API value by its name, lookup key or value map, as a person reads it. */
export interface ResolvedName {
  field: string;
  /** The column label (labelOf). */
  label: string;
  /** The cell's text (a tag list's item). */
  text: string;
  id: string;
}

/** What one cell became: a value (and the names behind it), or the errors that make it unknown. */
export type CellResolution = { value: unknown; names: ResolvedName[] } | { errors: FieldError[] };

const NOUN: Readonly<Record<ReferenceKind, string>> = {
  pipeline: 'pipeline',
  stage: 'stage',
  tag: 'tag',
  company: 'company',
};

/** Where names come from, said in every REFERENCE_UNKNOWN: the API lists no pipelines, tags or companies. */
const WHERE =
  "names are known from the CRM's records (no list of them exists in the API): `crm-sync refs` shows them; use the id for one no record shows yet";

function quote(text: string): string {
  return JSON.stringify(text.length > 60 ? `${text.slice(0, 60)}…` : text);
}

function unknown(label: string, text: string, what: string, candidates: readonly string[], tail = ''): FieldError {
  const suggestion = nearestName(text, candidates);
  return {
    field: label,
    code: 'REFERENCE_UNKNOWN',
    value: text,
    ...(suggestion !== undefined ? { suggestion } : {}),
    message: `${quote(text)} is not ${what}${suggestion !== undefined ? ` (did you mean ${JSON.stringify(suggestion)}?)` : ''}${tail}`,
  };
}

/** did-you-mean over names as names compare (case and spaces ignored by nearest's squash). */
function nearestName(text: string, candidates: readonly string[]): string | undefined {
  const near = nearest(text, candidates);
  if (near !== undefined) return near;
  // nearest never offers the text itself; a name differing only in Unicode form is that name.
  const norm = text.normalize('NFKC').toLowerCase();
  return candidates.find((c) => c.normalize('NFKC').toLowerCase() === norm && c !== text);
}

/** One item (a cell, or a tag list's item) through its reference. */
function resolveItem(
  rule: ColumnRule & { reference: ReferenceKind },
  label: string,
  text: string,
  index: ReferenceIndex,
  pipelineId: string | undefined,
): { id: string } | { error: FieldError } {
  const kind = rule.reference;
  const found = index.resolve(kind, text, kind === 'stage' ? pipelineId : undefined);
  if (found.kind === 'found') return { id: found.id };
  if (found.kind === 'ambiguous') {
    const list = found.candidates
      .map((c) => `${c.id}${c.pipeline !== undefined ? ` (pipeline ${JSON.stringify(c.pipeline)})` : ''}`)
      .join(', ');
    const way =
      kind === 'stage'
        ? 'give the row its pipeline (a Pipeline column), or the stage id'
        : `give the ${NOUN[kind]} id instead`;
    return {
      error: {
        field: label,
        code: 'REFERENCE_AMBIGUOUS',
        value: text,
        message: `${quote(text)} names ${found.candidates.length} ${NOUN[kind]}s: ${list}; ${way}`,
      },
    };
  }
  const pipelineName = pipelineId !== undefined ? index.nameOf('pipeline', pipelineId) : undefined;
  if (kind === 'stage' && pipelineId !== undefined) {
    const elsewhere = found.elsewhere?.map((e) => index.nameOf('pipeline', index.pipelineOf(e.id) ?? '') ?? '?') ?? [];
    const tail =
      elsewhere.length > 0
        ? `; it is a stage of ${elsewhere.map((p) => `pipeline ${JSON.stringify(p)}`).join(', ')}`
        : `; ${WHERE}`;
    return {
      error: unknown(
        label,
        text,
        `a stage of pipeline ${JSON.stringify(pipelineName ?? pipelineId)}`,
        found.names,
        tail,
      ),
    };
  }
  return { error: unknown(label, text, `a ${NOUN[kind]} the CRM's records show`, found.names, `; ${WHERE}`) };
}

/**
 * A coerced cell of a column with `"by": "name"` → the id(s) it names. `pipelineId`: the row's
 * pipeline (resolved already), within which a stage is looked for. Every item of a tag list is
 * resolved; each one not known is an error of its own.
 */
export function resolveReferenceCell(
  rule: ColumnRule & { reference: ReferenceKind },
  label: string,
  value: unknown,
  index: ReferenceIndex,
  pipelineId?: string,
): CellResolution {
  const items = Array.isArray(value) ? (value as unknown[]).map(String) : [String(value)];
  const names: ResolvedName[] = [];
  const errors: FieldError[] = [];
  const ids: string[] = [];
  for (const text of items) {
    const r = resolveItem(rule, label, text, index, pipelineId);
    if ('error' in r) errors.push(r.error);
    else {
      ids.push(r.id);
      if (r.id !== text.trim()) names.push({ field: rule.field, label, text, id: r.id });
    }
  }
  if (errors.length > 0) return { errors };
  return { value: Array.isArray(value) ? ids : ids[0], names };
}

/** A coerced cell of a column with a `lookup` file or a `values` map → its value. */
export function resolveMappedCell(rule: ColumnRule, label: string, value: unknown): CellResolution {
  const items = Array.isArray(value) ? (value as unknown[]).map(String) : [String(value)];
  const names: ResolvedName[] = [];
  const errors: FieldError[] = [];
  const out: string[] = [];
  for (const text of items) {
    let id: string | undefined;
    let error: FieldError | undefined;
    if (rule.lookup) {
      id = rule.lookup.get(text);
      if (id === undefined)
        error = unknown(label, text, `a ${rule.lookup.file} key`, rule.lookup.keys, `; add it to ${rule.lookup.file}`);
    } else if (rule.values) {
      const { map, texts } = rule.values;
      id = map.get(normaliseReferenceName(text));
      // A value the API takes as it is (`won`) needs no entry of its own.
      if (id === undefined && [...map.values()].includes(text.trim())) id = text.trim();
      if (id === undefined) {
        const allowed = [...texts, ...new Set(map.values())].map((t) => JSON.stringify(t)).join(', ');
        error = unknown(label, text, 'one of the mapped values', texts, `; allowed: ${allowed}`);
      }
    }
    if (error !== undefined) errors.push(error);
    else if (id !== undefined) {
      out.push(id);
      if (id !== text.trim()) names.push({ field: rule.field, label, text, id });
    }
  }
  if (errors.length > 0) return { errors };
  return { value: Array.isArray(value) ? out : out[0], names };
}

import { z } from 'zod';
import { DEAL_STATUSES, LEAD_STATUSES } from './request-bodies.js';
import type { ListResource } from './operation-table.js';

/**
 * Response records of the CRM (spec §2). Objects are loose: the real service may add fields
 * at any time and an extra field must never fail a run. Types come from these schemas only.
 */

const id = z.string().min(1, 'must be a non-empty string id');
/** The spec says ISO 8601; accept anything Date can read rather than one exact format. */
const dateTime = z.string().refine((s) => !Number.isNaN(Date.parse(s)), 'is not an ISO 8601 date-time');
const ref = z.looseObject({ id, name: z.string() });

export const TagSchema = z.looseObject({ id, name: z.string(), style: z.string() });
export type Tag = z.infer<typeof TagSchema>;

/**
 * Tags of leads and contacts: element shape "not shown" in the spec. Tag-shaped elements are
 * parsed as Tag (so their id is a string), anything else is kept as sent; read them through
 * `tagIdOf` / `tagNameOf` instead of assuming a shape.
 */
const looseTags = z.array(z.unknown()).transform((items): unknown[] =>
  items.map((item) => {
    const tag = TagSchema.safeParse(item);
    return tag.success ? tag.data : item;
  }),
);

export const DealSchema = z.looseObject({
  id,
  name: z.string(),
  status: z.enum(DEAL_STATUSES),
  value: z.number(),
  currency: z.string(),
  price: z.string(),
  unique_number: z.string(),
  contact: ref.nullable(),
  company: ref.nullable(),
  owner: z.string().nullable(),
  pipeline: ref.nullable(),
  stage: ref.nullable(),
  tags: z.array(TagSchema),
  created_at: dateTime,
  updated_at: dateTime,
});
export type Deal = z.infer<typeof DealSchema>;

export const LeadSchema = z.looseObject({
  id,
  name: z.string(),
  status: z.enum(LEAD_STATUSES),
  unique_number: z.string(),
  email: z.string(),
  phone_number: z.string(),
  contact: z.looseObject({ id: id.nullable(), name: z.string() }),
  company: z.looseObject({ id: id.nullable(), name: z.string().nullable() }),
  owner: z.string().nullable(),
  tags: looseTags,
  created_at: dateTime,
  updated_at: dateTime,
});
export type Lead = z.infer<typeof LeadSchema>;

export const ContactSchema = z.looseObject({
  id,
  name: z.string(),
  email: z.string(),
  phone_number: z.string(),
  created_at: dateTime,
  updated_at: dateTime,
  owner: z.string().nullable(),
  tags: looseTags,
  company: z.looseObject({ id: id.nullable(), name: z.string().nullable() }),
});
export type Contact = z.infer<typeof ContactSchema>;

const count = z.number().int().min(0);
export const PaginationSchema = z.looseObject({
  total_records: count,
  current_page_number: count,
  total_pages: count,
  page_size: count,
});
export type Pagination = z.infer<typeof PaginationSchema>;

/** One page of a list, with the records under a resource-neutral key. */
export interface ListPage<T> {
  records: T[];
  pagination: Pagination;
}

export const RECORD_SCHEMAS = {
  deals: DealSchema,
  leads: LeadSchema,
  contacts: ContactSchema,
} as const satisfies Record<ListResource, z.ZodType>;

export type RecordOf<R extends ListResource> = z.infer<(typeof RECORD_SCHEMAS)[R]>;

/** `{<plural>: T[], pagination}` → `{records, pagination}`. */
/** Built once per resource: zod compiles a schema on its first parse (operations.ts, RESPONSE_SCHEMAS). */
const LIST_PAGE_SCHEMAS = new Map<ListResource, z.ZodType>();

export function listPageSchema<R extends ListResource>(resource: R): z.ZodType<ListPage<RecordOf<R>>> {
  let schema = LIST_PAGE_SCHEMAS.get(resource);
  if (!schema) {
    const record: z.ZodType = RECORD_SCHEMAS[resource];
    schema = z
      .looseObject({ [resource]: z.array(record), pagination: PaginationSchema })
      .transform((page) => ({ records: page[resource], pagination: page.pagination }));
    LIST_PAGE_SCHEMAS.set(resource, schema);
  }
  // The record schema is picked by a runtime key, which TypeScript cannot follow through zod's generics.
  return schema as unknown as z.ZodType<ListPage<RecordOf<R>>>;
}

/** Single-record answers of the write endpoints. */
export const DealResponseSchema = z.looseObject({ deal: DealSchema });
export const LeadResponseSchema = z.looseObject({ lead: LeadSchema });
export const ContactResponseSchema = z.looseObject({ contact: ContactSchema });
export const TeamMembersResponseSchema = z.looseObject({ message: z.string() });

/** Id of a tag element of any shape (Tag object, `{id}` with a number, or a bare id string). */
export function tagIdOf(tag: unknown): string | undefined {
  if (typeof tag === 'string') return tag;
  if (typeof tag === 'object' && tag !== null && 'id' in tag) {
    const v = (tag as { id: unknown }).id;
    if (typeof v === 'string' || typeof v === 'number') return String(v);
  }
  return undefined;
}

/** Name of a tag element of any shape, when it has one. */
export function tagNameOf(tag: unknown): string | undefined {
  if (typeof tag === 'object' && tag !== null && 'name' in tag) {
    const v = (tag as { name: unknown }).name;
    if (typeof v === 'string') return v;
  }
  return undefined;
}

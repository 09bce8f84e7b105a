import { z } from 'zod';
import { EmailSchema } from './email-address.js';
import type { Operation } from './operation-table.js';

/**
 * Request bodies of the write endpoints (spec §4, wrapper keys and lead/contact field names as
 * docs/architecture.md reads them). This file is the one place to correct if the real service differs.
 * Ingest validates rows against these same schemas, so a row that passes is a body the API
 * accepts.
 */

export const DEAL_STATUSES = ['in_progress', 'won', 'lost'] as const;
export const LEAD_STATUSES = ['open', 'converted', 'archived'] as const;

/** Record identifiers are opaque strings; they go into a URL path, so keep them sane. */
export const RecordIdSchema = z
  .string()
  .trim()
  .min(1, 'must not be empty')
  .max(200, 'is longer than 200 characters')
  .refine((s) => !/[\s/?#\\]/.test(s), 'must not contain spaces, "/", "\\", "?" or "#"')
  // URL normalisation turns these path segments into the parent path (PATCH v2/contacts/.. is PATCH v2/).
  .refine((s) => s !== '.' && s !== '..', 'must not be "." or ".."')
  // eslint-disable-next-line no-control-regex -- control characters are exactly what is refused
  .refine((s) => !/[\u0000-\u001f\u007f]/.test(s), 'must not contain control characters');

const text = z.string().trim().min(1, 'must not be empty').max(1000, 'is longer than 1000 characters');
const ref = z.string().trim().min(1, 'must not be empty').max(200, 'is longer than 200 characters');
const tagIds = z.array(ref).max(100, 'has more than 100 tags');
const email = EmailSchema;

const dealFields = {
  name: text,
  value: z.number('must be a number').finite('must be a finite number'),
  status: z.enum(DEAL_STATUSES, `must be one of ${DEAL_STATUSES.join(', ')}`),
  owner_id: ref,
  stage_id: ref,
  pipeline_id: ref,
  position: z.number('must be a number').int('must be a whole number').min(0, 'must be 0 or more'),
  tag_ids: tagIds,
};

/** PATCH v2/deals/{id}: `name` is required by the spec. */
export const DealUpdateFieldsSchema = z
  .object({ ...dealFields, name: text.describe('required by the API on every deal update') })
  .partial({
    value: true,
    status: true,
    owner_id: true,
    stage_id: true,
    pipeline_id: true,
    position: true,
    tag_ids: true,
  })
  .strict();

/** POST v2/deals: the spec does not say which fields are required; a deal without a name is useless. */
export const DealCreateFieldsSchema = DealUpdateFieldsSchema;

const atLeastOne = (o: Record<string, unknown>) => Object.values(o).some((v) => v !== undefined);

export const LeadUpdateFieldsSchema = z
  .object({
    name: text,
    status: z.enum(LEAD_STATUSES, `must be one of ${LEAD_STATUSES.join(', ')}`),
    owner_id: ref,
    tag_ids: tagIds,
  })
  .partial()
  .strict()
  .refine(atLeastOne, 'a lead update needs at least one of name, status, owner_id, tag_ids');

export const ContactUpdateFieldsSchema = z
  .object({
    name: text,
    email,
    phone_number: z.string().trim().max(50, 'is longer than 50 characters'),
    company_id: ref,
    owner_id: ref,
    tag_ids: tagIds,
  })
  .partial()
  .strict()
  .refine(
    atLeastOne,
    'a contact update needs at least one of name, email, phone_number, company_id, owner_id, tag_ids',
  );

/** Options of a team-members request that are shared by every email in one request. */
export const InviteOptionsSchema = z
  .object({
    organization_role: ref.optional(),
    invited_by: email.optional(),
    /** A string in the API, not a boolean. */
    send_invitation_email: z.enum(['true', 'false'], 'must be "true" or "false"').optional(),
  })
  .strict();

export const TeamMembersBodySchema = InviteOptionsSchema.extend({
  emails: z.array(email).min(1, 'needs at least one email'),
}).strict();

/**
 * Each operation's body schema: the fields of an update or create, the shared options of an
 * invite. The operation table (operation-table.ts) says how the payload and request are built
 * around it; adding an operation adds its schema here.
 */
export const OPERATION_FIELDS = {
  'deal.update': DealUpdateFieldsSchema,
  'deal.create': DealCreateFieldsSchema,
  'lead.update': LeadUpdateFieldsSchema,
  'contact.update': ContactUpdateFieldsSchema,
  'team.invite': InviteOptionsSchema,
} as const satisfies Record<Operation, z.ZodObject>;

export type DealUpdateFields = z.infer<typeof DealUpdateFieldsSchema>;
export type DealCreateFields = z.infer<typeof DealCreateFieldsSchema>;
export type LeadUpdateFields = z.infer<typeof LeadUpdateFieldsSchema>;
export type ContactUpdateFields = z.infer<typeof ContactUpdateFieldsSchema>;
export type InviteOptions = z.infer<typeof InviteOptionsSchema>;
export type TeamMembersBody = z.infer<typeof TeamMembersBodySchema>;

/**
 * The value a field is cleared with (a mapping's `"emptyCells": "clear"`), for the fields whose
 * request body can hold an empty value. The spec types every request field as a string, number
 * or array and shows no null; it shows empty values only for `phone_number` ("May be an empty
 * string", §2.2–2.3) and tag lists (an empty `tags` array, §4.1), and an empty array is a valid
 * `tag_ids`. Every other field (a name, an email, a status, an owner, a company, a stage…) cannot
 * be cleared through this API: a mapping that asks is refused. Correct here if the service differs.
 */
export const CLEAR_VALUES: Readonly<Record<string, string | readonly string[]>> = {
  phone_number: '',
  tag_ids: [],
};

/** The value that clears `field` in a request of `op`, or undefined when the API cannot clear it. */
export function clearValueOf(op: Operation, field: string): string | readonly string[] | undefined {
  if (!Object.hasOwn(CLEAR_VALUES, field)) return undefined;
  return Object.hasOwn(OPERATION_FIELDS[op].shape, field) ? CLEAR_VALUES[field] : undefined;
}

import { z } from 'zod';
import { isEmailAddress } from './email-check.js';
import { DEAL_STATUSES, LEAD_STATUSES } from './sim-records.js';

/**
 * The simulator's own reading of the request bodies (docs/architecture.md's table). Deliberately written
 * apart from src/crm: if the client and the simulator disagree, the tests must see it.
 */

const text = z.string('must be a string').refine((s) => s.trim().length > 0, 'must not be blank');
const ref = z.string('must be a string').min(1, 'must not be empty');
const tagIds = z.array(ref, 'must be an array of strings');

export const DealFieldsSchema = z
  .strictObject(
    {
      name: text,
      value: z.number('must be a number'),
      status: z.enum(DEAL_STATUSES, `must be one of ${DEAL_STATUSES.join(', ')}`),
      owner_id: ref,
      stage_id: ref,
      pipeline_id: ref,
      position: z.int('must be an integer'),
      tag_ids: tagIds,
    },
    'must be an object',
  )
  .partial();

export const LeadFieldsSchema = z
  .strictObject(
    {
      name: text,
      status: z.enum(LEAD_STATUSES, `must be one of ${LEAD_STATUSES.join(', ')}`),
      owner_id: ref,
      tag_ids: tagIds,
    },
    'must be an object',
  )
  .partial();

export const ContactFieldsSchema = z
  .strictObject(
    {
      name: text,
      email: z.string('must be a string').refine(isEmailAddress, 'must be a valid email address'),
      // The spec allows an empty phone number.
      phone_number: z.string('must be a string'),
      company_id: ref,
      owner_id: ref,
      tag_ids: tagIds,
    },
    'must be an object',
  )
  .partial();

const body = 'body must be a JSON object';
export const DealBodySchema = z.strictObject({ deal: DealFieldsSchema }, body);
export const LeadBodySchema = z.strictObject({ lead: LeadFieldsSchema }, body);
export const ContactBodySchema = z.strictObject({ contact: ContactFieldsSchema }, body);

export type DealFields = z.infer<typeof DealFieldsSchema>;
export type LeadFields = z.infer<typeof LeadFieldsSchema>;
export type ContactFields = z.infer<typeof ContactFieldsSchema>;

/** Direct edits by tests may also set what the API cannot (currency, contact, company). */
export const DirectDealSchema = DealFieldsSchema.extend({
  currency: z.string().regex(/^[A-Z]{3}$/, 'must be a 3-letter currency code'),
  contact_id: ref.nullable(),
  company_id: ref.nullable(),
}).partial();
export const DirectLeadSchema = LeadFieldsSchema.extend({
  contact_id: ref.nullable(),
  company_id: ref.nullable(),
}).partial();
export const DirectContactSchema = ContactFieldsSchema;

export type DirectDealFields = z.infer<typeof DirectDealSchema>;
export type DirectLeadFields = z.infer<typeof DirectLeadSchema>;
export type DirectContactFields = z.infer<typeof DirectContactSchema>;

/** One line naming every problem, e.g. `deal.value: must be a number; deal: unknown field(s) colour`. */
export function describeIssues(error: z.ZodError): string {
  return error.issues
    .map((issue) => {
      const where = issue.path.map(String).join('.');
      if (issue.code === 'unrecognized_keys') return `${where || 'body'}: unknown field(s) ${issue.keys.join(', ')}`;
      return where ? `${where}: ${issue.message}` : issue.message;
    })
    .join('; ');
}

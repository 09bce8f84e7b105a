import { z } from 'zod';
import {
  ContactUpdateFieldsSchema,
  DealCreateFieldsSchema,
  DealUpdateFieldsSchema,
  InviteOptionsSchema,
  LeadUpdateFieldsSchema,
  RecordIdSchema,
} from './request-bodies.js';
import { EmailSchema } from './email-address.js';
import { OPERATIONS, type Operation } from './operation-names.js';

export { OPERATIONS, type Operation };
/** A payload is everything a worker needs to make the call: never the API key. */
export const OperationSchema = z.enum(OPERATIONS);

/** Resource each operation writes (the list endpoint that reconcile pages). */
export const OPERATION_RESOURCE = {
  'deal.update': 'deals',
  'deal.create': 'deals',
  'lead.update': 'leads',
  'contact.update': 'contacts',
  'team.invite': 'team-members',
} as const satisfies Record<Operation, string>;

/**
 * Fields an update request may not leave out (spec: `name` on every deal update). When a later
 * row already wrote one, an older row still sends it, with the later row's value.
 */
export const UPDATE_REQUIRED_FIELDS = {
  'deal.update': ['name'],
  'lead.update': [],
  'contact.update': [],
} as const satisfies Record<'deal.update' | 'lead.update' | 'contact.update', readonly string[]>;

export const DealUpdatePayloadSchema = z.object({
  op: z.literal('deal.update'),
  id: RecordIdSchema,
  fields: DealUpdateFieldsSchema,
});
export const DealCreatePayloadSchema = z.object({
  op: z.literal('deal.create'),
  fields: DealCreateFieldsSchema,
  /**
   * Set by an upsert: its match key and the row's normalised key value (`name=acme renewal`).
   * Creates of one key are serialised workspace-wide, and a key another upsert created
   * meanwhile turns the create into an update of that deal. Default: none (a plain create).
   */
  match: z.string().min(1).optional(),
});
export const LeadUpdatePayloadSchema = z.object({
  op: z.literal('lead.update'),
  id: RecordIdSchema,
  fields: LeadUpdateFieldsSchema,
});
export const ContactUpdatePayloadSchema = z.object({
  op: z.literal('contact.update'),
  id: RecordIdSchema,
  fields: ContactUpdateFieldsSchema,
});
/** One row of an invite file: one email. The producer groups rows into batched requests. */
export const TeamInvitePayloadSchema = z.object({
  op: z.literal('team.invite'),
  email: EmailSchema,
  options: InviteOptionsSchema,
});

export const OperationPayloadSchema = z.discriminatedUnion('op', [
  DealUpdatePayloadSchema,
  DealCreatePayloadSchema,
  LeadUpdatePayloadSchema,
  ContactUpdatePayloadSchema,
  TeamInvitePayloadSchema,
]);

export type OperationPayload = z.infer<typeof OperationPayloadSchema>;
export type PayloadOf<O extends Operation> = Extract<OperationPayload, { op: O }>;

import { z } from 'zod';
import { OPERATION_FIELDS, RecordIdSchema } from './request-bodies.js';
import { EmailSchema } from './email-address.js';
import { RECORD_SCHEMAS } from './records.js';
import { OPERATIONS, OPERATION_TABLE, type Operation, type UpdateOperation } from './operation-table.js';

export * from './operation-table.js';
/** A payload is everything a worker needs to make the call: never the API key. */
export const OperationSchema = z.enum(OPERATIONS);

/** Resource each operation writes (the list endpoint that reconcile pages), from the operation table. */
export const OPERATION_RESOURCE = Object.fromEntries(OPERATIONS.map((op) => [op, OPERATION_TABLE[op].resource])) as {
  readonly [O in Operation]: (typeof OPERATION_TABLE)[O]['resource'];
};

/** Fields an update request may not leave out, from the operation table (its `updateRequired`). */
export const UPDATE_REQUIRED_FIELDS = Object.fromEntries(
  OPERATIONS.map((op) => [op, OPERATION_TABLE[op].updateRequired]),
) as unknown as { readonly [O in Operation]: readonly string[] };

type Table = typeof OPERATION_TABLE;
export type OperationFields<O extends Operation> = z.infer<(typeof OPERATION_FIELDS)[O]>;

/** The payload of one row, by the operation's row shape (operation-table.ts). */
type PayloadFor<O extends Operation> = Table[O]['shape'] extends 'update'
  ? { op: O; id: string; fields: OperationFields<O> }
  : Table[O]['shape'] extends 'create'
    ? {
        op: O;
        fields: OperationFields<O>;
        /**
         * Set by an upsert: its match key and the row's normalised key value (`name=acme renewal`).
         * Creates of one key are serialised workspace-wide, and a key another upsert created
         * meanwhile turns the create into an update of that deal. Default: none (a plain create).
         */
        match?: string | undefined;
      }
    : /** One row of an invite file: one email. The producer groups rows into batched requests. */
      { op: O; email: string; options: OperationFields<O> };

export type OperationPayload = { [O in Operation]: PayloadFor<O> }[Operation];
export type PayloadOf<O extends Operation> = Extract<OperationPayload, { op: O }>;
export type UpdatePayload = PayloadOf<UpdateOperation>;
export type InvitePayload = Extract<OperationPayload, { email: string }>;

/** Whether a payload updates one record by id (its operation's row shape). */
export function isUpdatePayload(p: OperationPayload): p is UpdatePayload {
  return OPERATION_TABLE[p.op].shape === 'update';
}

export type CreatePayload = Exclude<OperationPayload, UpdatePayload | InvitePayload>;

/** Whether a payload makes a new record (its operation's row shape): a duplicate-safe create. */
export function isCreatePayload(p: OperationPayload): p is CreatePayload {
  return OPERATION_TABLE[p.op].shape === 'create';
}

/** Whether a payload is one email of an invite batch (its operation's row shape). */
export function isInvitePayload(p: OperationPayload): p is InvitePayload {
  return OPERATION_TABLE[p.op].shape === 'invite';
}

/** The zod schema of one operation's payload, built around its body schema by its row shape. */
export function payloadSchemaOf(op: Operation): z.ZodObject {
  const fields = OPERATION_FIELDS[op];
  const tag = z.literal(op);
  switch (OPERATION_TABLE[op].shape) {
    case 'update':
      return z.object({ op: tag, id: RecordIdSchema, fields });
    case 'create':
      return z.object({ op: tag, fields, match: z.string().min(1).optional() });
    case 'invite':
      return z.object({ op: tag, email: EmailSchema, options: fields });
  }
}

export const OperationPayloadSchema = z.discriminatedUnion(
  'op',
  OPERATIONS.map(payloadSchemaOf) as unknown as [z.ZodObject, ...z.ZodObject[]],
) as unknown as z.ZodType<OperationPayload>;

/**
 * A row's fields by name, each with its schema, as a mapping may target them: the record `id`
 * of an update, the `email` of an invite, then the operation's body fields.
 */
export function rowFieldSchemas(op: Operation): Readonly<Record<string, z.ZodType>> {
  const { shape } = OPERATION_FIELDS[op];
  switch (OPERATION_TABLE[op].shape) {
    case 'update':
      return { id: RecordIdSchema, ...shape };
    case 'create':
      return { ...shape };
    case 'invite':
      return { email: EmailSchema, ...shape };
  }
}

type AnsweringOperation = UpdateOperation | 'deal.create';

/**
 * Each write's answer schema, built once: zod compiles a schema on its first parse, so one
 * built per request cost a compile per request (+0.1–0.2 ms of worker CPU a row, measured).
 */
const RESPONSE_SCHEMAS = new Map<AnsweringOperation, z.ZodType<unknown>>();

/** The schema of a write's answer: the written record under the operation's wrapper key. */
export function responseSchemaOf(op: AnsweringOperation): z.ZodType<unknown> {
  let schema = RESPONSE_SCHEMAS.get(op);
  if (!schema) {
    const { wrapper, resource } = OPERATION_TABLE[op];
    schema = z.looseObject({ [wrapper]: RECORD_SCHEMAS[resource] }).transform((body) => body[wrapper]);
    RESPONSE_SCHEMAS.set(op, schema);
  }
  return schema;
}

import type { z } from 'zod';
import {
  OPERATION_FIELDS,
  OPERATION_TABLE,
  OperationPayloadSchema,
  type Operation,
  type OperationPayload,
} from '../crm/index.js';
import { ROW_FIELD, type FieldError } from './field-error.js';
import { fieldsOf } from './mapping.js';

/** The payload a row's fields make for `op` (by its row shape in the operation table), before validation. */
function candidateOf(op: Operation, fields: Record<string, unknown>): Record<string, unknown> {
  const shape = OPERATION_TABLE[op].shape;
  if (shape === 'invite') {
    const options: Record<string, unknown> = {};
    for (const k of Object.keys(OPERATION_FIELDS[op].shape)) if (fields[k] !== undefined) options[k] = fields[k];
    return { op, email: fields.email, options };
  }
  const { id, ...rest } = fields;
  return shape === 'create' ? { op, fields } : { op, id, fields: rest };
}

const WORDS: Record<string, string> = {
  string: 'text',
  number: 'a number',
  array: 'a list',
  object: 'an object',
  boolean: 'true or false',
};

/** zod's issue → a plain sentence about one field (no zod vocabulary reaches people). */
function toFieldErrors(issue: z.core.$ZodIssue, candidate: Record<string, unknown>): FieldError[] {
  // Payload paths are ["fields", name, ...], ["options", name] or [name]: the name is the field.
  const path = issue.path[0] === 'fields' || issue.path[0] === 'options' ? issue.path.slice(1) : issue.path;
  if (issue.code === 'unrecognized_keys')
    return issue.keys.map((k) => ({ field: k, message: 'is not a field of this operation' }));
  const [name, index] = path;
  if (name === undefined) return [{ field: ROW_FIELD, message: issue.message }];
  const field = String(name);
  let value: unknown = candidate;
  for (const p of issue.path) value = (value as Record<PropertyKey, unknown> | undefined)?.[p];
  let message = issue.message;
  if (issue.code === 'invalid_type') {
    message =
      value === undefined
        ? 'is required'
        : message.startsWith('Invalid')
          ? `must be ${WORDS[issue.expected] ?? issue.expected}`
          : message;
  } else if (message.startsWith('Invalid')) {
    message = 'is not valid';
  }
  if (typeof index === 'number') message = `item ${index + 1} ${message}`;
  return [{ field, message }];
}

/**
 * Checks a row's API fields against the operation's payload schema (the request bodies the
 * API accepts). Errors name API fields; callers relabel them with source columns.
 */
export function validateRow(
  op: Operation,
  fields: Record<string, unknown>,
): { ok: true; payload: OperationPayload } | { ok: false; errors: FieldError[] } {
  const known = fieldsOf(op);
  const errors: FieldError[] = [];
  const own: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(fields)) {
    if (known.includes(k)) own[k] = v;
    else errors.push({ field: k, message: `is not a field of ${op}` });
  }
  const candidate = candidateOf(op, own);
  const result = OperationPayloadSchema.safeParse(candidate);
  if (!result.success) {
    const seen = new Set<string>();
    for (const issue of result.error.issues) {
      for (const e of toFieldErrors(issue, candidate)) {
        const key = `${e.field}\u0000${e.message}`;
        if (!seen.has(key)) errors.push(e);
        seen.add(key);
      }
    }
  }
  if (errors.length > 0 || !result.success) return { ok: false, errors };
  return { ok: true, payload: result.data };
}

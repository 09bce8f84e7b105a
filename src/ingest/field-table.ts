import { z } from 'zod';
import { OPERATIONS, rowFieldSchemas, type Operation } from '../crm/index.js';
import { fieldsOf, inferType, type ColumnType } from './mapping.js';

/**
 * The table of every operation's fields in docs/imports.md, made from the zod schemas rows are checked
 * with, so the documentation cannot drift from what is enforced (test/ingest/readme-fields.test.ts
 * compares it with docs/imports.md).
 */
/** Rules the schemas hold as refinements, which zod cannot describe by itself. */
const RULE_NOTES: Record<string, string> = {
  id: 'record id: 1–200 characters, no spaces, `/`, `\\`, `?`, `#` or control characters, not `.` or `..`',
  email: 'an email address: labels of 1–63 letters, digits or inner hyphens, a top-level label, a dot-atom local part',
  invited_by: 'an email address (as `email`)',
};

const TYPE_WORDS: Record<ColumnType, string> = {
  string: 'text',
  number: 'number',
  integer: 'whole number',
  list: 'list (cells split on `;`)',
  'boolean-string': '"true"/"false" (yes/no/1/0 accepted)',
};

const OP_NOTES: Partial<Record<Operation, string>> = {
  'lead.update': 'besides `id`, at least one field',
  'contact.update': 'besides `id`, at least one field',
};

/**
 * Notes of one field of one operation: readings of our own where the spec says nothing. The
 * create schema reuses the update's; its reason for a required name is our own.
 */
const FIELD_NOTES: Partial<Record<Operation, Readonly<Record<string, string>>>> = {
  'deal.create': { name: 'the spec does not say; a deal without a name is useless, so crm-sync requires one' },
};

function unwrap(schema: z.ZodType): z.ZodType {
  return schema instanceof z.ZodOptional ? (schema.unwrap() as z.ZodType) : schema;
}

function notesOf(op: Operation, field: string, schema: z.ZodType): string {
  const inner = unwrap(schema);
  const own = FIELD_NOTES[op]?.[field];
  if (own !== undefined) return own;
  const notes: string[] = [];
  if (inner instanceof z.ZodEnum) notes.push(`one of ${(inner.options as string[]).map((o) => `\`${o}\``).join(', ')}`);
  const rule = RULE_NOTES[field];
  if (rule !== undefined) notes.push(rule);
  if (field === 'position') notes.push('0 or more');
  const text = inner.description ?? schema.description;
  if (text !== undefined) notes.push(text);
  return notes.join('; ');
}

/** One markdown table: operation, field, required, type, notes. */
export function fieldTable(): string {
  const lines = ['| operation | field | required | type | notes |', '|---|---|---|---|---|'];
  for (const op of OPERATIONS) {
    const schemas = rowFieldSchemas(op);
    for (const field of fieldsOf(op)) {
      const schema = schemas[field];
      if (schema === undefined) throw new Error(`no schema for ${op}.${field}`);
      const required = !schema.safeParse(undefined).success;
      const opNote = field === fieldsOf(op)[0] ? OP_NOTES[op] : undefined;
      const notes = [notesOf(op, field, schema), opNote].filter(Boolean).join('; ');
      lines.push(
        `| \`${op}\` | \`${field}\` | ${required ? 'yes' : 'no'} | ${TYPE_WORDS[inferType(field)]} | ${notes} |`,
      );
    }
  }
  return lines.join('\n');
}

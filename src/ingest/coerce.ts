import type { ColumnRule } from './mapping.js';

export type Coerced = { value: unknown } | { omit: true } | { error: string };

const OMIT: Coerced = { omit: true };
const NUMBER = /^[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?$/;
const TRUE = new Set(['true', 'yes', '1']);
const FALSE = new Set(['false', 'no', '0']);

/** A value quoted for a message, cut short so a huge cell cannot flood a result row. */
function show(value: unknown): string {
  const text = typeof value === 'string' ? value : JSON.stringify(value);
  return JSON.stringify(text.length > 40 ? `${text.slice(0, 40)}…` : text);
}

function kindOf(value: unknown): string {
  return Array.isArray(value) ? 'a list' : 'an object';
}

function toNumber(raw: unknown, integer: boolean): Coerced {
  let n: number;
  if (typeof raw === 'number') n = raw;
  else if (typeof raw === 'string') {
    const s = raw.trim();
    if (s === '') return OMIT;
    if (!NUMBER.test(s)) {
      const hint = s.includes(',') ? ' (use a dot for decimals and no thousands separators)' : '';
      return { error: `${show(raw)} is not a number${hint}` };
    }
    n = Number(s);
  } else return { error: `${show(raw)} is not a number` };
  if (!Number.isFinite(n)) return { error: `${show(raw)} is not a finite number` };
  if (integer && !Number.isInteger(n)) return { error: `${show(raw)} is not a whole number` };
  return { value: n };
}

/**
 * C0 control characters other than tab, line feed and carriage return never belong in a CRM
 * field (a NUL cuts text short in many systems); the cell is refused, not cleaned.
 */
export function controlCharProblem(text: string): string | undefined {
  // eslint-disable-next-line no-control-regex -- control characters are exactly what is looked for
  const at = text.search(/[\u0000-\u0008\u000b\u000c\u000e-\u001f]/);
  if (at < 0) return undefined;
  const code = text.charCodeAt(at).toString(16).toUpperCase().padStart(4, '0');
  return `contains the control character U+${code} at position ${at + 1}`;
}

/** A JSON number or boolean where text is meant: refused unless the mapping asked for text. */
function notText(raw: unknown, lenient: boolean): Coerced | undefined {
  if (typeof raw !== 'number' && typeof raw !== 'boolean') return undefined;
  if (lenient) return { value: String(raw) };
  const kind = typeof raw === 'number' ? 'a number' : 'true or false';
  return {
    error: `must be text, not ${kind} (${JSON.stringify(raw)}); quote it in the file, or set "type": "string" for this column in the mapping`,
  };
}

function toList(raw: unknown, separator: string, lenient: boolean): Coerced {
  if (typeof raw === 'string') {
    const items = raw
      .split(separator)
      .map((s) => s.trim())
      .filter((s) => s !== '');
    return items.length === 0 ? OMIT : { value: items };
  }
  // An explicit JSON array is kept even when empty: [] says "no tags", an empty cell says nothing.
  if (Array.isArray(raw)) {
    const items: string[] = [];
    for (const [i, item] of raw.entries()) {
      if (typeof item === 'number' && !lenient)
        return {
          error: `item ${i + 1} must be text, not a number (${JSON.stringify(item)}); quote it, or set "type": "list" for this column in the mapping`,
        };
      if (typeof item !== 'string' && typeof item !== 'number')
        return { error: `the list may only hold text, found ${show(item)}` };
      const s = String(item).trim();
      const bad = controlCharProblem(s);
      if (bad !== undefined) return { error: `item ${i + 1} ${bad}` };
      if (s !== '') items.push(s);
    }
    return { value: items };
  }
  if (typeof raw === 'number') {
    const text = notText(raw, lenient);
    return text !== undefined && 'value' in text ? { value: [text.value] } : (text ?? OMIT);
  }
  return { error: `${show(raw)} is not a list` };
}

function toBooleanString(raw: unknown): Coerced {
  if (typeof raw === 'boolean') return { value: String(raw) };
  if (typeof raw === 'string' || typeof raw === 'number') {
    const s = String(raw).trim().toLowerCase();
    if (s === '') return OMIT;
    if (TRUE.has(s)) return { value: 'true' };
    if (FALSE.has(s)) return { value: 'false' };
  }
  return { error: `${show(raw)} is not yes or no (use true, false, yes, no, 1 or 0)` };
}

function toText(raw: unknown, trim: boolean, lenient: boolean): Coerced {
  const other = notText(raw, lenient);
  if (other !== undefined) return other;
  if (typeof raw !== 'string') return { error: `must be text, not ${kindOf(raw)}` };
  const s = trim ? raw.trim() : raw;
  return s === '' ? OMIT : { value: s };
}

/**
 * One source value → the API value of `rule`'s type. Empty and null values are omitted, never
 * sent as "". Nothing is coerced silently: a JSON number or boolean becomes text only when the
 * mapping names the column's type (`rule.typed`).
 */
export function coerce(raw: unknown, rule: ColumnRule): Coerced {
  if (raw === null || raw === undefined) return OMIT;
  if (typeof raw === 'string') {
    const bad = controlCharProblem(raw);
    if (bad !== undefined) return { error: bad };
  }
  switch (rule.type) {
    case 'number':
      return toNumber(raw, false);
    case 'integer':
      return toNumber(raw, true);
    case 'list':
      return toList(raw, rule.separator, rule.typed);
    case 'boolean-string':
      return toBooleanString(raw);
    default:
      return toText(raw, rule.trim, rule.typed);
  }
}

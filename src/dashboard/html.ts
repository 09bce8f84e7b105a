/** Markup that is already escaped (or written by us): `html` inserts it as is. */
export class SafeHtml {
  constructor(readonly value: string) {}

  toString(): string {
    return this.value;
  }
}

/** What a template may interpolate. Strings and numbers are escaped; arrays are joined. */
export type HtmlValue = SafeHtml | string | number | boolean | null | undefined | readonly HtmlValue[];

const ENTITIES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

export function escapeHtml(value: string): string {
  return value.replace(/[&<>"']/g, (c) => ENTITIES[c] ?? c);
}

function render(value: HtmlValue): string {
  if (value instanceof SafeHtml) return value.value;
  if (value === null || value === undefined || value === false || value === true) return '';
  if (Array.isArray(value)) return (value as readonly HtmlValue[]).map(render).join('');
  return escapeHtml(String(value));
}

/**
 * Tagged template that escapes every interpolated value unless it is SafeHtml. Row values are
 * untrusted input (a cell may hold `<script>`), so escaping is the default, never an opt-in.
 */
export function html(strings: TemplateStringsArray, ...values: HtmlValue[]): SafeHtml {
  let out = strings[0] ?? '';
  for (let i = 0; i < values.length; i++) out += render(values[i]) + (strings[i + 1] ?? '');
  return new SafeHtml(out);
}

/**
 * A value as a non-executable JSON data block (`<script type="application/json">`) for the page's
 * script to read. The browser does not decode entities in a script element, so escapeHtml would
 * corrupt it; instead `<`, `>`, `&` and the two JavaScript line separators are written as \u
 * escapes, which JSON.parse reads back: no `</script>` or `<!--` in the data can end the block.
 */
export function jsonBlock(attributes: SafeHtml, value: unknown): SafeHtml {
  const json = JSON.stringify(value).replace(
    /[<>&\u2028\u2029]/g,
    (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`,
  );
  return new SafeHtml(`<script type="application/json" ${attributes.value}>${json}</script>`);
}

/** A query string from defined values (for links that keep the current filters). */
export function query(params: Record<string, string | number | undefined>): string {
  const search = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== '') search.set(k, String(v));
  const s = search.toString();
  return s === '' ? '' : `?${s}`;
}

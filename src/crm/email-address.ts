import { z } from 'zod';

/**
 * What the spec (§4.5, "valid email addresses") means by an address, read as the address forms
 * mail actually accepts: a dot-atom local part (RFC 5322 §3.2.3, at most 64 octets) and a host
 * name of dot-separated labels (RFC 1035 §2.3.4: 1–63 letters, digits or hyphens, no hyphen at
 * either end, 253 characters in all) ending in an alphabetic top-level label. Quoted local
 * parts and address literals are refused: no CRM form takes them. The simulator checks the same
 * rule with code of its own (src/sim/email-check.ts), so one mistake cannot hide in both.
 */
const LOCAL_CHARS = /^[A-Za-z0-9!#$%&'*+/=?^_`{|}~.-]+$/;
const LABEL = /^[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?$/;
const TOP_LABEL = /^(?:[A-Za-z]{2,63}|xn--[A-Za-z0-9-]{1,59})$/;

/** Why `value` is not a valid address, or undefined when it is. */
export function emailProblem(value: string): string | undefined {
  const at = value.lastIndexOf('@');
  if (at < 0) return 'has no "@"';
  const local = value.slice(0, at);
  const domain = value.slice(at + 1);
  if (local === '') return 'has nothing before the "@"';
  if (local.length > 64) return 'has more than 64 characters before the "@"';
  if (!LOCAL_CHARS.test(local)) return 'has a character that is not allowed before the "@"';
  if (local.startsWith('.') || local.endsWith('.') || local.includes('..')) return 'has a misplaced "." before the "@"';
  if (domain === '') return 'has no domain after the "@"';
  if (domain.length > 253) return 'has a domain longer than 253 characters';
  const labels = domain.split('.');
  if (labels.length < 2) return 'has a domain without a top-level part (like ".com")';
  for (const label of labels) {
    if (label === '') return 'has an empty part in its domain';
    if (label.length > 63) return 'has a domain part longer than 63 characters';
    if (!LABEL.test(label)) return `has a domain part "${label.slice(0, 63)}" that is not a valid host name label`;
  }
  if (!TOP_LABEL.test(labels[labels.length - 1] as string)) return 'does not end in a valid top-level domain';
  return undefined;
}

export function isValidEmail(value: string): boolean {
  return emailProblem(value) === undefined;
}

/** The one email schema of the client's request bodies. */
export const EmailSchema = z.string('must be text').superRefine((value, ctx) => {
  const problem = emailProblem(value);
  if (problem !== undefined) ctx.addIssue({ code: 'custom', message: `is not a valid email address: it ${problem}` });
});

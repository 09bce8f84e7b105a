/**
 * The simulator's own reading of "a valid email address" (spec §4.5). Written apart from the
 * client's validator on purpose, by scanning characters instead of matching patterns: the
 * simulator is how tests see what the CRM would refuse, and a shared mistake would be invisible.
 * Rule: local part 1–64 characters of the dot-atom set with no leading, trailing or double dot;
 * domain up to 253 characters, two or more labels of 1–63 letters, digits and inner hyphens; a
 * top-level label of letters only (or an `xn--` IDN label).
 */
const ATOM_SPECIALS = "!#$%&'*+/=?^_`{|}~-";

function isAlnum(ch: string): boolean {
  const c = ch.charCodeAt(0);
  return (c >= 48 && c <= 57) || (c >= 65 && c <= 90) || (c >= 97 && c <= 122);
}

function isLetter(ch: string): boolean {
  const c = ch.toLowerCase().charCodeAt(0);
  return c >= 97 && c <= 122;
}

function localPartOk(local: string): boolean {
  if (local.length < 1 || local.length > 64) return false;
  let previous = '.';
  for (const ch of local) {
    if (ch === '.') {
      if (previous === '.') return false;
    } else if (!isAlnum(ch) && !ATOM_SPECIALS.includes(ch)) return false;
    previous = ch;
  }
  return previous !== '.';
}

function labelOk(label: string): boolean {
  if (label.length < 1 || label.length > 63) return false;
  if (label.startsWith('-') || label.endsWith('-')) return false;
  for (const ch of label) if (!isAlnum(ch) && ch !== '-') return false;
  return true;
}

function topLabelOk(label: string): boolean {
  if (label.toLowerCase().startsWith('xn--')) return label.length > 4;
  if (label.length < 2) return false;
  for (const ch of label) if (!isLetter(ch)) return false;
  return true;
}

export function isEmailAddress(value: unknown): boolean {
  if (typeof value !== 'string') return false;
  const parts = value.split('@');
  if (parts.length !== 2) return false;
  const [local, domain] = parts as [string, string];
  if (!localPartOk(local) || domain.length === 0 || domain.length > 253) return false;
  const labels = domain.split('.');
  if (labels.length < 2 || !labels.every(labelOk)) return false;
  return topLabelOk(labels[labels.length - 1] as string);
}

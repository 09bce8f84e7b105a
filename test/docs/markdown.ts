import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';

/*
 * The repository's Markdown as readers meet it: README.md and the pages in docs/. Shared by the
 * docs tests so that "which files are the docs" and "what GitHub calls a heading's anchor" are
 * decided once.
 */

export const ROOT = resolve(import.meta.dirname, '..', '..');

/** README.md and docs/*.md, as paths relative to the repository root. */
export function docFiles(root: string = ROOT): string[] {
  const docs = readdirSync(join(root, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .sort()
    .map((f) => `docs/${f}`);
  return ['README.md', ...docs];
}

export function readDoc(path: string, root: string = ROOT): string {
  return readFileSync(join(root, path), 'utf8');
}

/** The text outside fenced code blocks, line numbers kept (fenced lines become empty). */
function unfenced(markdown: string): string[] {
  let fenced = false;
  return markdown.split('\n').map((line) => {
    if (/^\s*(```|~~~)/.test(line)) {
      fenced = !fenced;
      return '';
    }
    return fenced ? '' : line;
  });
}

/**
 * The anchor GitHub gives a heading (github-slugger's rule): lower-cased, everything but
 * letters, digits, spaces, hyphens and underscores removed, spaces made hyphens; a repeated
 * slug gets `-1`, `-2`, … in order.
 */
export function headingAnchors(markdown: string): Set<string> {
  const seen = new Map<string, number>();
  const anchors = new Set<string>();
  for (const line of unfenced(markdown)) {
    const m = /^ {0,3}#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (!m) continue;
    const text = m[1]!
      .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1') // a link's text only
      .replace(/<[^>]+>/g, '');
    const base = text
      .toLowerCase()
      .replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '')
      .replace(/ /g, '-');
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    anchors.add(n === 0 ? base : `${base}-${n}`);
  }
  return anchors;
}

export interface Link {
  line: number;
  target: string;
}

/** Inline links and images `[text](target)` outside code (fenced blocks and `code spans`). */
export function links(markdown: string): Link[] {
  const found: Link[] = [];
  unfenced(markdown).forEach((raw, i) => {
    const line = raw.replace(/`[^`]*`/g, (span) => ' '.repeat(span.length));
    for (const m of line.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g))
      found.push({ line: i + 1, target: m[1]! });
  });
  return found;
}

/**
 * Every relative link or #anchor in `file` that leads nowhere: a file that does not exist, or
 * an anchor with no heading of that slug in the Markdown file it names (or in `file` itself).
 * Absolute URLs (http:, https:, mailto:) are not followed.
 */
export function brokenLinks(file: string, root: string = ROOT): string[] {
  const broken: string[] = [];
  const from = join(root, file);
  for (const { line, target } of links(readFileSync(from, 'utf8'))) {
    if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue;
    const hash = target.indexOf('#');
    const pathPart = decodeURIComponent(hash < 0 ? target : target.slice(0, hash));
    const anchor = hash < 0 ? undefined : decodeURIComponent(target.slice(hash + 1));
    const to = pathPart === '' ? from : resolve(dirname(from), pathPart);
    const where = `${file}:${line}: ${target}`;
    if (!existsSync(to)) {
      broken.push(`${where} (no file ${relative(root, to)})`);
      continue;
    }
    if (anchor === undefined || anchor === '') continue;
    if (statSync(to).isDirectory() || !to.endsWith('.md')) {
      broken.push(`${where} (an anchor into ${relative(root, to)}, which is not a Markdown page)`);
      continue;
    }
    if (!headingAnchors(readFileSync(to, 'utf8')).has(anchor))
      broken.push(`${where} (no heading #${anchor} in ${relative(root, to)})`);
  }
  return broken;
}

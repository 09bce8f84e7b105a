/** Case, spaces, dashes and underscores do not tell column names apart for a person. */
function squash(s: string): string {
  return s.toLowerCase().replace(/[\s_\-.]+/g, '');
}

/** Optimal string alignment distance (Levenshtein plus adjacent swaps: `emial` → `email` is 1). */
function distance(a: string, b: string): number {
  const rows: number[][] = [];
  for (let i = 0; i <= a.length; i++) rows.push([i]);
  for (let j = 1; j <= b.length; j++) (rows[0] as number[])[j] = j;
  for (let i = 1; i <= a.length; i++) {
    const row = rows[i] as number[];
    const prev = rows[i - 1] as number[];
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let d = Math.min((prev[j] as number) + 1, (row[j - 1] as number) + 1, (prev[j - 1] as number) + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1])
        d = Math.min(d, ((rows[i - 2] as number[])[j - 2] as number) + 1);
      row[j] = d;
    }
  }
  return (rows[a.length] as number[])[b.length] as number;
}

/**
 * The candidate a person most likely meant by `name`, never `name` itself, or undefined when
 * none is close: equal but for case and separators, one a prefix of the other (`phone` → `phone_number`), the
 * name ending in it as exports name a field after their record (`Contact ID` → `id`), or a few typos apart
 * (`emial` → `email`).
 */
export function nearest(name: string, candidates: readonly string[]): string | undefined {
  const n = squash(name);
  if (n === '') return undefined;
  let best: { candidate: string; score: number } | undefined;
  for (const candidate of candidates) {
    const c = squash(candidate);
    // The name itself is no suggestion ("id" did you mean "id"?).
    if (c === '' || candidate === name) continue;
    let score: number;
    if (c === n) score = 0;
    else if (c.startsWith(n) || n.startsWith(c)) score = 1;
    else if (c.length >= 2 && n.endsWith(c)) score = 2;
    else {
      const d = distance(n, c);
      if (d > Math.max(1, Math.floor(Math.min(n.length, c.length) / 3))) continue;
      score = 1 + d;
    }
    if (best === undefined || score < best.score) best = { candidate, score };
  }
  return best?.candidate;
}

/** ` (did you mean "x"?)`, or nothing. */
export function didYouMean(name: string, candidates: readonly string[]): string {
  const near = nearest(name, candidates);
  return near === undefined ? '' : ` (did you mean ${JSON.stringify(near)}?)`;
}

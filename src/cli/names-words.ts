// How a plan's names read: which names became which ids, and the values nothing resolved,
// grouped by column and value (`plan`, and `import --dry-run`'s summary).
import { unresolvedWords, type NameGroup, type UnresolvedGroup } from '../reconcile/light.js';

/** Names shown at most; the rest are counted. */
const SHOWN = 12;

/** Lines for a summary: `  names → ids: Stage "Negotiation" → stg_… (60 rows), …` and each unresolved value. */
export function namesWords(summary: { names: readonly NameGroup[]; unresolved: readonly UnresolvedGroup[] }): string[] {
  const lines: string[] = [];
  if (summary.names.length > 0) {
    lines.push('  names → ids:');
    for (const n of summary.names.slice(0, SHOWN))
      lines.push(`    ${n.column}: ${JSON.stringify(n.text)} → ${n.id} (${n.rows} row${n.rows === 1 ? '' : 's'})`);
    if (summary.names.length > SHOWN) lines.push(`    … and ${summary.names.length - SHOWN} more`);
  }
  if (summary.unresolved.length > 0) {
    lines.push('  not resolved (rows invalid, not sent):');
    for (const g of summary.unresolved.slice(0, SHOWN)) lines.push(`    ${unresolvedWords(g)}`);
    if (summary.unresolved.length > SHOWN) lines.push(`    … and ${summary.unresolved.length - SHOWN} more`);
  }
  return lines;
}

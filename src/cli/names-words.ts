// How a plan's names read: which names became which ids, and the values nothing resolved,
// grouped by column and value (`plan`, and `import --dry-run`'s summary).
import { unresolvedWords, type NameGroup, type UnresolvedGroup } from '../reconcile/light.js';

/** Names shown at most per column, and values nothing resolved; the rest are counted. */
const SHOWN = 5;
const SHOWN_UNRESOLVED = 12;

/** Lines for a summary: `  names → ids: Stage "Negotiation" → stg_… (60 rows), …` and each unresolved value. */
export function namesWords(summary: { names: readonly NameGroup[]; unresolved: readonly UnresolvedGroup[] }): string[] {
  const lines: string[] = [];
  if (summary.names.length > 0) {
    lines.push('  names → ids:');
    const columns = [...new Set(summary.names.map((n) => n.column))];
    for (const column of columns) {
      const names = summary.names.filter((n) => n.column === column);
      const shown = names
        .slice(0, SHOWN)
        .map((n) => `${JSON.stringify(n.text)} → ${n.id} (${n.rows} row${n.rows === 1 ? '' : 's'})`);
      const more = names.length > SHOWN ? `, … and ${names.length - SHOWN} more` : '';
      lines.push(`    ${column}: ${shown.join(', ')}${more}`);
    }
  }
  if (summary.unresolved.length > 0) {
    lines.push('  not resolved (rows invalid, not sent):');
    for (const g of summary.unresolved.slice(0, SHOWN_UNRESOLVED)) lines.push(`    ${unresolvedWords(g)}`);
    if (summary.unresolved.length > SHOWN_UNRESOLVED)
      lines.push(`    … and ${summary.unresolved.length - SHOWN_UNRESOLVED} more`);
  }
  return lines;
}

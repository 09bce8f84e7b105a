import type { RunRecord } from './run-types.js';

/**
 * What a run's `skipped` count means in words: a dry run records the rows it would send as
 * skipped, so it must never read as "unchanged" of a real run (`runs list`, `runs show`, the
 * summary at a run's end all say it this one way).
 */
export function skippedWords(run: Pick<RunRecord, 'options'>): string {
  if (run.options.dryRun !== true) return 'unchanged';
  return run.options.reconcile === true ? 'would be sent or unchanged' : 'would be sent';
}

/** `1 field`, `2 fields`, `1,200 rows`. */
export function plural(n: number, word: string, many = `${word}s`): string {
  return `${n.toLocaleString('en-US')} ${n === 1 ? word : many}`;
}

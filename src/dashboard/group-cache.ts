import type { ProblemGroups, RunRecord } from '../runs/index.js';

/**
 * The last grouping of a few runs' problems, reused while the run's problem counts and finish
 * time are unchanged: a finished run's page (and every reload of it) groups its rows once, not
 * on each load. A run whose counts move is grouped again. Entries: at most `size`, oldest out.
 */
export class GroupCache {
  readonly #entries = new Map<string, { signature: string; groups: ProblemGroups }>();

  constructor(private readonly size = 32) {}

  static signature(run: RunRecord): string {
    const c = run.counts;
    return `${c.failed}/${c.invalid}/${c.uncertain}/${c.cancelled}/${c.queued}/${run.finishedAt ?? ''}`;
  }

  async get(run: RunRecord, compute: () => Promise<ProblemGroups>): Promise<ProblemGroups> {
    const signature = GroupCache.signature(run);
    const hit = this.#entries.get(run.id);
    if (hit !== undefined && hit.signature === signature) return hit.groups;
    const groups = await compute();
    this.#entries.delete(run.id);
    this.#entries.set(run.id, { signature, groups });
    if (this.#entries.size > this.size) this.#entries.delete(this.#entries.keys().next().value!);
    return groups;
  }
}

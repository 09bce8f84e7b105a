import type { RefusalReason, RowResult, RunStore, WriterFence } from '../runs/index.js';

/** A result and who writes it (the fence checked atomically with the write). */
export interface FencedResult {
  result: RowResult;
  fence: WriterFence;
}

/** A result the store refused, and why. */
export interface Refusal {
  row: number;
  reason: RefusalReason;
}

interface Pending {
  runId: string;
  item: FencedResult;
  resolve: (refused: RefusalReason | null) => void;
  reject: (err: unknown) => void;
}

/**
 * Group commit for row results. A job must not complete before its result is stored (a crash in
 * between would lose the row), but one Redis round trip per row would make the store the
 * bottleneck. Each job awaits `write`; results that arrive in the same tick go to Redis as one
 * atomic batch per run, each checked against its writer's fence.
 */
export class ResultWriter {
  #pending: Pending[] = [];
  #scheduled = false;

  constructor(private readonly store: RunStore) {}

  /** Stores the results; answers those refused (a stale or late writer: the stored result stands). */
  async write(runId: string, items: FencedResult[]): Promise<Refusal[]> {
    const outcomes = await Promise.all(
      items.map(
        (item) =>
          new Promise<RefusalReason | null>((resolve, reject) => {
            this.#pending.push({ runId, item, resolve, reject });
            this.#schedule();
          }),
      ),
    );
    const refused: Refusal[] = [];
    outcomes.forEach((reason, i) => {
      if (reason !== null) refused.push({ row: items[i]!.result.row, reason });
    });
    return refused;
  }

  #schedule(): void {
    if (this.#scheduled) return;
    this.#scheduled = true;
    setImmediate(() => {
      this.#scheduled = false;
      void this.#flush();
    });
  }

  async #flush(): Promise<void> {
    const batch = this.#pending;
    this.#pending = [];
    const byRun = new Map<string, Pending[]>();
    for (const p of batch) {
      const items = byRun.get(p.runId);
      if (items) items.push(p);
      else byRun.set(p.runId, [p]);
    }
    await Promise.all(
      [...byRun].map(async ([runId, items]) => {
        try {
          const { refused } = await this.store.recordFenced(
            runId,
            items.map((i) => i.item.result),
            { fences: items.map((i) => i.item.fence) },
          );
          const why = new Map(refused.map((r) => [r.row, r.reason]));
          for (const i of items) i.resolve(why.get(i.item.result.row) ?? null);
        } catch (err) {
          for (const i of items) i.reject(err);
        }
      }),
    );
  }
}

import type { RowResult, RunStore } from '../runs/index.js';

interface Pending {
  runId: string;
  result: RowResult;
  resolve: () => void;
  reject: (err: unknown) => void;
}

/**
 * Group commit for row results. A job must not complete before its result is stored (a crash in
 * between would lose the row), but one Redis round trip per row would make the store the
 * bottleneck. Each job awaits `write`; results that arrive in the same tick go to Redis as one
 * atomic batch per run.
 */
export class ResultWriter {
  #pending: Pending[] = [];
  #scheduled = false;

  constructor(private readonly store: RunStore) {}

  write(runId: string, results: RowResult[]): Promise<void> {
    return Promise.all(
      results.map(
        (result) =>
          new Promise<void>((resolve, reject) => {
            this.#pending.push({ runId, result, resolve, reject });
            this.#schedule();
          }),
      ),
    ).then(() => undefined);
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
          await this.store.recordResults(runId, items.map((i) => i.result));
          for (const i of items) i.resolve();
        } catch (err) {
          for (const i of items) i.reject(err);
        }
      }),
    );
  }
}

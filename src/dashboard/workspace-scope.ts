import { CrmSyncError } from '../errors/index.js';
import type { ListRunsQuery, RunRecord, RunStore } from '../runs/index.js';

/** What newRunId makes: `20261123-035512-345-000k3j9q`. Anything else is no run of ours. */
const RUN_ID = /^\d{8}-\d{6}-\d{3}-[0-9a-z]{8}$/;

/** Deepest runs-list position served when several workspaces are merged (page × size). */
const MAX_MERGED_POSITION = 10_000;

export function isRunId(id: string): boolean {
  return RUN_ID.test(id);
}

/**
 * The workspaces a dashboard serves. Started with `-w`, every route answers only for those:
 * another workspace's run is "not found", exactly like a run that does not exist, so the
 * dashboard does not even tell which ids are in use. Without `-w` it serves every run.
 */
export class WorkspaceScope {
  readonly #only: ReadonlySet<string> | null;

  constructor(only: readonly string[] | null) {
    this.#only = only === null ? null : new Set(only);
  }

  /** The workspaces served, or null for every workspace. */
  get served(): readonly string[] | null {
    return this.#only === null ? null : [...this.#only];
  }

  allows(workspace: string): boolean {
    return this.#only === null || this.#only.has(workspace);
  }

  /**
   * The run, if its id is well formed, it exists and its workspace is served; else RUN_NOT_FOUND
   * (404). A malformed id (`<id>:results:0`) is refused before any Redis call.
   */
  async run(store: RunStore, id: string): Promise<RunRecord> {
    const missing = () => new CrmSyncError('RUN_NOT_FOUND', `no run ${id.slice(0, 80)}`);
    if (!isRunId(id)) throw missing();
    const run = await store.getRun(id);
    if (run === null || !this.allows(run.workspace)) throw missing();
    return run;
  }

  /** The runs list within the scope; several served workspaces are merged newest first. */
  async listRuns(
    store: RunStore,
    query: ListRunsQuery & { offset: number; limit: number },
  ): Promise<{ runs: RunRecord[]; total: number }> {
    const only = this.#only;
    if (only === null) return store.listRuns(query);
    if (query.workspace !== undefined)
      return this.allows(query.workspace) ? store.listRuns(query) : { runs: [], total: 0 };
    const names = [...only];
    if (names.length === 1) return store.listRuns({ ...query, workspace: names[0] });
    const end = query.offset + query.limit;
    if (end > MAX_MERGED_POSITION)
      throw new CrmSyncError(
        'USAGE',
        `pages past run ${MAX_MERGED_POSITION.toLocaleString('en-US')} are not shown across several workspaces: filter by one workspace`,
      );
    const parts = await Promise.all(
      names.map((workspace) => store.listRuns({ ...query, workspace, offset: 0, limit: end })),
    );
    const runs = parts
      .flatMap((p) => p.runs)
      .sort((a, b) => (a.createdAt === b.createdAt ? (a.id < b.id ? 1 : -1) : a.createdAt < b.createdAt ? 1 : -1))
      .slice(query.offset, end);
    return { runs, total: parts.reduce((sum, p) => sum + p.total, 0) };
  }
}

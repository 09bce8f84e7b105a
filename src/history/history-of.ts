import { PgHistory } from './pg-history.js';
import { recordHistory, type HistoryEntry, type RecordHistoryOptions } from './record-history.js';

export interface HistoryOfOptions extends RecordHistoryOptions {
  /** The config's `history`: with a database, it answers (from an index, whatever Redis pruned). */
  history?: { postgresUrl: string; table: string } | undefined;
}

/**
 * A record's history from where it is kept: the PostgreSQL history when one is configured,
 * else the workspace's runs in Redis and their archives. The CLI and the dashboard both ask here.
 */
export async function historyOf(options: HistoryOfOptions): Promise<HistoryEntry[]> {
  const { history, ...fromRuns } = options;
  if (!history) return recordHistory(fromRuns);
  const db = new PgHistory({ url: history.postgresUrl, table: history.table });
  try {
    return await db.query(options.workspace, options.recordId);
  } finally {
    await db.close();
  }
}

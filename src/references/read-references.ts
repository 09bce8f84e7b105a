import { DEFAULTS } from '../config/index.js';
import { LIST_RESOURCES, type CrmClient, type ListResource } from '../crm/index.js';
import { ReferenceCollector, ReferenceIndex, type ReferencePass } from './reference-index.js';
import type { ReferenceStore } from './reference-store.js';

export interface ReadReferencesOptions {
  client: CrmClient;
  /** The workspace's shared request budget: every page takes a token. Default: pages are not budgeted. */
  budget?: { take(signal?: AbortSignal): Promise<unknown> };
  /** Where passes are shared between processes. Default: none (every call reads what it needs). */
  store?: ReferenceStore;
  /** Lists whose references the caller needs. */
  lists: readonly ListResource[];
  /**
   * Passes the caller made itself, from pages it read anyway (reconcile's and plan's index):
   * they stand for their lists, and are stored. Default none.
   */
  fresh?: readonly ReferencePass[];
  /** A stored pass older than this is read again (ms). Default DEFAULTS.workspace.referencesMaxAgeMs. */
  maxAgeMs?: number;
  /** Read every needed list again, whatever the store holds. Default false. */
  refresh?: boolean;
  pageSize?: number;
  version?: 'v1' | 'v2';
  signal?: AbortSignal;
}

export interface ReadReferencesResult {
  index: ReferenceIndex;
  /** List requests this call made (0 when the store or the caller's own pages had them). */
  pages: number;
  /** Lists read now. */
  read: ListResource[];
}

/** One pass over a list, in the budget, keeping only its references. */
export async function readReferencePass(
  client: CrmClient,
  list: ListResource,
  options: Pick<ReadReferencesOptions, 'budget' | 'pageSize' | 'version' | 'signal'> = {},
): Promise<{ pass: ReferencePass; pages: number }> {
  const collector = new ReferenceCollector(list);
  let pages = 0;
  const { budget } = options;
  for await (const page of client.pages(list, {
    pageSize: options.pageSize ?? DEFAULTS.client.pageSize,
    ...(options.version ? { version: options.version } : {}),
    ...(options.signal ? { signal: options.signal } : {}),
    ...(budget ? { beforeFetch: () => budget.take(options.signal) } : {}),
  })) {
    pages++;
    for (const record of page.records) collector.add(record);
  }
  return { pass: collector.pass(), pages };
}

/**
 * The workspace's reference index for a run: for each list it needs, the caller's own pass, else
 * the stored one while younger than `maxAgeMs`, else one pass now (stored for the others); the
 * other lists' stored passes, while young, add what they show. Never a request per row: at most
 * one pass per needed list.
 */
export async function readReferences(options: ReadReferencesOptions): Promise<ReadReferencesResult> {
  const maxAgeMs = options.maxAgeMs ?? DEFAULTS.workspace.referencesMaxAgeMs;
  const now = Date.now();
  const passes: ReferencePass[] = [];
  const read: ListResource[] = [];
  let pages = 0;
  for (const list of LIST_RESOURCES) {
    const own = options.fresh?.find((p) => p.list === list);
    if (own) {
      passes.push(own);
      await options.store?.write(own);
      continue;
    }
    const needed = options.lists.includes(list);
    const stored = options.refresh && needed ? undefined : await options.store?.read(list);
    if (stored && now - stored.readAtMs <= maxAgeMs) {
      passes.push(stored);
      continue;
    }
    if (!needed) continue;
    const made = await readReferencePass(options.client, list, options);
    pages += made.pages;
    read.push(list);
    passes.push(made.pass);
    await options.store?.write(made.pass);
  }
  return { index: new ReferenceIndex(passes), pages, read };
}

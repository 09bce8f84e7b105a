import { referencesKey } from '../keys/index.js';
import type { RedisClient } from '../redis/index.js';
import { LIST_RESOURCES, type ListResource } from '../crm/index.js';
import { ReferenceIndex, ReferencePassSchema, type ReferencePass } from './reference-index.js';

/** A pass nobody read again for a week is of no use: refreshed long before, or the workspace is gone. */
const PASS_TTL_MS = 7 * 24 * 3600 * 1000;

/**
 * The workspace's list passes' references in Redis, one key per list (`<p>:ws:{<w>}:refs:<list>`):
 * shared by every process, so a worker's retry, a nightly sync and `crm-sync refs` read the
 * same names, and a pass is made once per `referencesMaxAgeMs` rather than once per command.
 */
export class ReferenceStore {
  readonly #redis: RedisClient;
  readonly #prefix: string;
  readonly workspace: string;

  constructor(options: { redis: RedisClient; prefix: string; workspace: string }) {
    this.#redis = options.redis;
    this.#prefix = options.prefix;
    this.workspace = options.workspace;
  }

  #key(list: ListResource): string {
    return referencesKey(this.#prefix, this.workspace, list);
  }

  /** The list's stored pass, or undefined (none, or one this version cannot read: it is read again). */
  async read(list: ListResource): Promise<ReferencePass | undefined> {
    const text = await this.#redis.get(this.#key(list));
    if (text === null) return undefined;
    try {
      const parsed = ReferencePassSchema.safeParse(JSON.parse(text));
      return parsed.success && parsed.data.list === list ? parsed.data : undefined;
    } catch {
      return undefined;
    }
  }

  /** Every stored pass as an index, whatever its age: for a suggestion, which reads nothing from the CRM. */
  async index(): Promise<ReferenceIndex> {
    const passes = await Promise.all(LIST_RESOURCES.map((list) => this.read(list)));
    return new ReferenceIndex(passes.filter((p): p is ReferencePass => p !== undefined));
  }

  /** Keeps the pass unless a newer one of the list is already there (two processes read at once). */
  async write(pass: ReferencePass): Promise<void> {
    const current = await this.read(pass.list);
    if (current !== undefined && current.readAtMs > pass.readAtMs) return;
    await this.#redis.set(this.#key(pass.list), JSON.stringify(pass), 'PX', PASS_TTL_MS);
  }

  /** Bytes the stored passes take as values (for the benchmark and `refs --json`). */
  async bytes(lists: readonly ListResource[]): Promise<number> {
    let total = 0;
    for (const list of lists) total += await this.#redis.strlen(this.#key(list));
    return total;
  }
}

import type { RedisClient } from '../redis/index.js';
import type { RunKeys, RunRef } from '../keys/index.js';

/*
 * The names a run's rows gave for the ids they sent (`"by": "name"`, a lookup file, a value
 * map): per field, id → the row's text, kept beside the run (`<run>:names`) rather than in
 * every row's result. The first row's text wins; a later rename in the CRM changes nothing here,
 * so a result reads as the row said it (`"Negotiation" → stg_1cbb…`). Every display of a run's
 * values asks namedValueWords (change-words.ts) with this map.
 */

/** Per field, id → the name a row of the run gave for it. */
export type RunNames = Readonly<Record<string, Readonly<Record<string, string>>>>;

/** One id sent for a name (the row decoder's ResolvedName has this shape). */
export interface SentName {
  field: string;
  id: string;
  text: string;
}

const SEP = '\u001f';

/** Names of many rows → the map's entries not yet in `seen` (a producer sends each id once). */
export function newNames(names: Iterable<SentName>, seen: Set<string>): SentName[] {
  const out: SentName[] = [];
  for (const n of names) {
    const key = `${n.field}${SEP}${n.id}`;
    if (seen.has(key)) continue;
    seen.add(key);
    out.push(n);
  }
  return out;
}

/** Adds names, keeping a name already there (HSETNX: the first row's text). */
export async function addRunNames(
  redis: RedisClient,
  keys: RunKeys,
  ref: RunRef,
  names: readonly SentName[],
): Promise<void> {
  if (names.length === 0) return;
  const key = keys.names(ref);
  const tx = redis.pipeline();
  for (const n of names) tx.hsetnx(key, `${n.field}${SEP}${n.id}`, n.text.trim());
  await tx.exec();
}

/** The run's names as a map (empty when its rows named nothing). */
export async function readRunNames(redis: RedisClient, keys: RunKeys, ref: RunRef): Promise<RunNames> {
  return runNamesOf(await redis.hgetall(keys.names(ref)));
}

/** The hash's fields → RunNames (also an archive's `names`). */
export function runNamesOf(hash: Readonly<Record<string, string>>): RunNames {
  const out: Record<string, Record<string, string>> = {};
  for (const [key, name] of Object.entries(hash)) {
    const at = key.indexOf(SEP);
    if (at <= 0) continue;
    (out[key.slice(0, at)] ??= {})[key.slice(at + 1)] = name;
  }
  return out;
}

/** RunNames → the hash's fields (an archive keeps them so). */
export function runNamesHash(names: RunNames): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [field, ids] of Object.entries(names))
    for (const [id, name] of Object.entries(ids)) out[`${field}${SEP}${id}`] = name;
  return out;
}

import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { RedisKey } from 'ioredis';
import type { RedisClient } from './redis-client.js';

/** `--- @include "includes/<name>"` (bullmq's spelling), on a line of its own. */
const INCLUDE = /^--- @include "([\w/-]+)"[ \t]*$/gm;

/**
 * A script under ./commands, with its includes inlined (each once, where first named). Read
 * from beside this module, so it works from src/ (tsx, vitest) and from dist/ (the build copies
 * the .lua files there).
 */
function readCommand(path: string, seen: Set<string>): string {
  const text = readFileSync(new URL(`./commands/${path}.lua`, import.meta.url), 'utf8');
  return text.replace(INCLUDE, (_line, include: string) => {
    if (seen.has(include)) return `-- (${include} included above)`;
    seen.add(include);
    return readCommand(include, seen).trimEnd();
  });
}

/**
 * A Lua script run by EVALSHA, falling back to EVAL once when the server does not know it
 * (first use, or after a Redis restart / SCRIPT FLUSH). Called only through its typed wrapper
 * (define-script.ts); this module's positional `run` is for tests. We do not use `defineCommand`
 * because the Redis client belongs to the caller and should not grow commands behind
 * its back.
 */
export class LuaScript {
  readonly sha: string;

  /** `numberOfKeys`, when given, is checked on every run: a wrapper's key list cannot drift. */
  constructor(
    readonly source: string,
    readonly numberOfKeys?: number,
  ) {
    this.sha = createHash('sha1').update(source).digest('hex');
  }

  /**
   * `commands/<name>-<numberOfKeys>.lua` (bullmq's naming), read once at module load.
   * `constants` become `local NAME = value` lines above the script: numbers TypeScript owns
   * (a bucket's size, a drift rate) are written once, there.
   */
  static load(file: string, constants: Record<string, number> = {}): LuaScript {
    const keys = /-(\d+)$/.exec(file);
    if (!keys) throw new Error(`Lua command ${file}: the name must end in -<numberOfKeys>`);
    const head = Object.entries(constants).map(([name, value]) => `local ${name} = ${value}\n`);
    return new LuaScript(head.join('') + readCommand(file, new Set()), Number(keys[1]));
  }

  async run(
    redis: RedisClient,
    keys: readonly string[],
    args: ReadonlyArray<string | number | Buffer>,
  ): Promise<unknown> {
    return this.runWords(redis, keys.length, [...keys, ...args]);
  }

  /** `words`: the keys (`numberOfKeys` of them) and then the arguments, in one list. */
  async runWords(
    redis: RedisClient,
    numberOfKeys: number,
    words: ReadonlyArray<string | number | Buffer>,
  ): Promise<unknown> {
    if (this.numberOfKeys !== undefined && numberOfKeys !== this.numberOfKeys)
      throw new Error(`a Lua script of ${this.numberOfKeys} keys was given ${numberOfKeys}`);
    // ioredis flattens an array argument (its Command copies args.flat()), so the words go as one
    // array, not spread into another; its typings offer that form for keys only, but a number in
    // it is sent as any argument is.
    const list = words as RedisKey[];
    try {
      return await redis.evalsha(this.sha, numberOfKeys, list);
    } catch (error) {
      if (error instanceof Error && error.message.startsWith('NOSCRIPT')) {
        return redis.eval(this.source, numberOfKeys, list);
      }
      throw error;
    }
  }
}

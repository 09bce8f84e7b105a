import { CrmSyncError } from '../errors/index.js';
import { LuaScript } from './lua-script.js';
import type { RedisClient } from './redis-client.js';

/*
 * The one way TypeScript calls a Lua script (docs/architecture.md, "Decisions, and why":
 * scripts, one typed wrapper each): keys and arguments by the names the script's header gives them, a typed reply out. A
 * script's header (`KEYS[i] name`, `ARGV[i] name`, `ARGV[i..] name` for a tail of any length)
 * and its wrapper are compared by test/redis/script-contracts.test.ts, and so are the kinds the
 * script returns (`return {'kind', ...}`, `return 1`) and those the wrapper's reply knows. So a
 * change on one side that the other does not follow fails a test, not a row in production.
 */

export type ScriptArg = string | number | Buffer;

/**
 * How a script's reply becomes a value. `kinds`: the reply kinds the script may answer — the
 * first string of a returned table (`{'send', ...}`), or the integer it returns (`return 0`) —
 * or undefined for a reply that is a value (a count, a time, a list).
 */
export interface ScriptReply<R> {
  readonly kinds?: readonly (string | number)[];
  decode(raw: unknown, script: string): R;
}

/** What the contract test reads of a wrapper. */
export interface ScriptContract {
  readonly file: string;
  readonly keys: readonly string[];
  readonly args: readonly string[];
  /** The name of the ARGV tail after the named ones, for a script that takes one. */
  readonly rest: string | undefined;
  readonly kinds: readonly (string | number)[] | undefined;
  readonly lua: LuaScript;
  /** The source as sent (constants and includes inlined). */
  readonly source: string;
}

export interface ScriptSpec<K extends string, A extends string, R> {
  /** `commands/<file>.lua`: `<name>-<number of keys>`. */
  file: string;
  /** KEYS by name, in the header's order. */
  keys: readonly K[];
  /** ARGV by name, in the header's order. */
  args: readonly A[];
  /** The header's `ARGV[n..] <rest>`: a tail of any length after the named ones. */
  rest?: string;
  reply: ScriptReply<R>;
  /** Numbers TypeScript owns, written as `local NAME = value` above the script (LuaScript.load). */
  constants?: Record<string, number>;
}

const CONTRACTS: ScriptContract[] = [];

/** Every wrapper defined so far (each module defines its own at load), for the contract test. */
export function scriptContracts(): readonly ScriptContract[] {
  return CONTRACTS;
}

/** A script with named keys and arguments and a typed reply. */
export class Script<K extends string, A extends string, R> implements ScriptContract {
  readonly file: string;
  readonly keys: readonly K[];
  readonly args: readonly A[];
  readonly rest: string | undefined;
  readonly kinds: readonly (string | number)[] | undefined;
  readonly lua: LuaScript;
  readonly #reply: ScriptReply<R>;

  constructor(spec: ScriptSpec<K, A, R>) {
    this.file = spec.file;
    this.keys = spec.keys;
    this.args = spec.args;
    this.rest = spec.rest;
    this.kinds = spec.reply.kinds;
    this.#reply = spec.reply;
    this.lua = LuaScript.load(spec.file, spec.constants);
    if (this.lua.numberOfKeys !== spec.keys.length)
      throw new Error(
        `Lua command ${spec.file}: ${spec.keys.length} keys named, the file name says ${this.lua.numberOfKeys}`,
      );
  }

  /** The source as sent (constants and includes inlined). */
  get source(): string {
    return this.lua.source;
  }

  /**
   * One EVALSHA. The call's words are laid out in one array (what the positional call allocated
   * for its key and argument lists), so a per-row script costs what it did.
   */
  async run(
    redis: RedisClient,
    keys: Readonly<Record<K, string>>,
    args: Readonly<Record<A, ScriptArg>>,
    rest?: readonly ScriptArg[],
  ): Promise<R> {
    if (rest !== undefined && this.rest === undefined) throw new Error(`${this.file} takes no ARGV tail`);
    const k = this.keys;
    const a = this.args;
    const words: ScriptArg[] = new Array<ScriptArg>(k.length + a.length + (rest?.length ?? 0));
    let i = 0;
    for (const name of k) words[i++] = keys[name];
    for (const name of a) words[i++] = args[name];
    if (rest !== undefined) for (const value of rest) words[i++] = value;
    return this.#reply.decode(await this.lua.runWords(redis, k.length, words), this.file);
  }
}

/** Defines a script's wrapper (and lists it for the contract test). */
export function defineScript<const K extends string, const A extends string, R>(
  spec: ScriptSpec<K, A, R>,
): Script<K, A, R> {
  const script = new Script(spec);
  CONTRACTS.push(script);
  return script;
}

function unreadable(script: string, raw: unknown): CrmSyncError {
  const shown = Array.isArray(raw) ? `{${raw.map(String).join(', ')}}` : String(raw);
  return new CrmSyncError(
    'RESULT_UNREADABLE',
    `the Lua script ${script} answered ${shown}, which its wrapper does not know`,
  );
}

/** A field of a kind's reply: the raw element (a string, an integer, or nil) in, its value out. */
export type FieldDecoder<T> = (raw: unknown) => T;

export const asString: FieldDecoder<string> = (raw) => (raw === null || raw === undefined ? '' : String(raw));
export const asNumber: FieldDecoder<number> = (raw) => Number(raw);
export const asOptionalString: FieldDecoder<string | undefined> = (raw) =>
  raw === null || raw === undefined ? undefined : String(raw);

type KindFields = Record<string, FieldDecoder<unknown>>;

/** The reply `{kind, field...}` as an object: `{ kind, field: value, ... }`. */
export type KindsOf<S extends Record<string, KindFields>> = {
  [T in keyof S & string]: { kind: T } & { [F in keyof S[T]]: ReturnType<S[T][F]> };
}[keyof S & string];

/**
 * A reply that is a table whose first element names its kind (`{'wait', ms}`): `spec` names each
 * kind's further elements in order, with their decoders. An unknown kind is an error.
 */
export function kindReply<const S extends Record<string, KindFields>>(spec: S): ScriptReply<KindsOf<S>> {
  const fields = new Map<string, Array<[string, FieldDecoder<unknown>]>>();
  for (const [kind, f] of Object.entries(spec)) fields.set(kind, Object.entries(f));
  return {
    kinds: [...fields.keys()],
    decode(raw, script) {
      const kind = Array.isArray(raw) ? raw[0] : undefined;
      const named = typeof kind === 'string' ? fields.get(kind) : undefined;
      if (named === undefined) throw unreadable(script, raw);
      const out: Record<string, unknown> = { kind };
      for (let i = 0; i < named.length; i++) {
        const [name, decode] = named[i]!;
        out[name] = decode((raw as unknown[])[i + 1]);
      }
      return out as KindsOf<S>;
    },
  };
}

/** An integer reply that is one of `codes` (`return 0` / `return 1` ...). */
export function codeReply<const C extends number>(codes: readonly C[]): ScriptReply<C> {
  return {
    kinds: codes,
    decode(raw, script) {
      const n = Number(raw);
      if (!(codes as readonly number[]).includes(n)) throw unreadable(script, raw);
      return n as C;
    },
  };
}

/** A table whose first element is one of `codes` (`return {0, f, ttl}`): `decode` reads the rest. */
export function codedListReply<const C extends number, R>(
  codes: readonly C[],
  decode: (code: C, raw: readonly unknown[]) => R,
): ScriptReply<R> {
  return {
    kinds: codes,
    decode(raw, script) {
      const code = Array.isArray(raw) ? Number(raw[0]) : NaN;
      if (!(codes as readonly number[]).includes(code)) throw unreadable(script, raw);
      return decode(code as C, raw as unknown[]);
    },
  };
}

/** `return 1` (yes) or `return 0` (no). */
export const flagReply: ScriptReply<boolean> = {
  kinds: [0, 1],
  decode(raw, script) {
    if (raw !== 0 && raw !== 1) throw unreadable(script, raw);
    return raw === 1;
  },
};

/** A reply that is a value, not a kind (a count, a time, a list), decoded by `decode`. */
export function valueReply<R>(decode: (raw: unknown) => R): ScriptReply<R> {
  return { decode: (raw) => decode(raw) };
}

/** An integer (or a number written as text) the script computed. */
export const numberReply: ScriptReply<number> = valueReply(Number);

/** A table of values, each as text (nil as ''). */
export const stringListReply: ScriptReply<string[]> = valueReply((raw) =>
  Array.isArray(raw) ? raw.map(asString) : [],
);

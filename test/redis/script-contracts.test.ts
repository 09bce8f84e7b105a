import { readdirSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import {
  asNumber,
  asString,
  codedListReply,
  codeReply,
  flagReply,
  kindReply,
  scriptContracts,
  type ScriptContract,
} from '../../src/redis/index.js';
// Every module that defines a script's wrapper, loaded so each is listed (scriptContracts).
import '../../src/runs/fence-scripts.js';
import '../../src/runs/run-scripts.js';
import '../../src/runs/lookup-pass-board.js';
import '../../src/rate/token-bucket-scripts.js';
import '../../src/plans/plan-store.js';
import '../../src/dashboard/auth-throttle.js';
import '../../src/dashboard/session-store.js';
import '../../src/schedule/sync-lock.js';
import '../../src/queue/work-board.js';
import '../../src/runtime/migrate-layout.js';
import '../../src/metrics/run-series.js';
import { COUNT_NAMES, REFUSAL_REASONS } from '../../src/runs/run-scripts.js';

/*
 * The contract between each Lua script and its TypeScript wrapper (src/redis/define-script.ts;
 * docs/architecture.md, "Decisions, and why": scripts, one typed wrapper each): the header's KEYS and ARGV are the
 * wrapper's, by count, order and name, and every kind the script can return is one its wrapper's
 * reply knows.
 */

const dir = new URL('../../src/redis/commands/', import.meta.url);
const files = readdirSync(dir)
  .filter((f) => f.endsWith('.lua'))
  .map((f) => f.slice(0, -'.lua'.length))
  .sort();

interface Header {
  text: string;
  keys: string[];
  args: string[];
  rest: string | undefined;
}

/** `KEYS[i] name`, `ARGV[i] name` and `ARGV[i..] name` lines of the leading `--[[ ]]` comment. */
function parseHeader(file: string, source: string): Header {
  const text = /^--\[\[([\s\S]*?)\]\]/.exec(source)?.[1];
  if (text === undefined) throw new Error(`${file}: no --[[ ]] header`);
  const header: Header = { text, keys: [], args: [], rest: undefined };
  for (const line of text.split('\n')) {
    const m = /^\s*(KEYS|ARGV)\[(\d+)(\.\.)?\]\s+(\w+)/.exec(line);
    if (!m) {
      if (/^\s*(KEYS|ARGV)\[/.test(line)) throw new Error(`${file}: a header line the contract cannot read: ${line}`);
      continue;
    }
    const [, list, index, tail, name] = m;
    const names = list === 'KEYS' ? header.keys : header.args;
    if (Number(index) !== names.length + 1 || header.rest !== undefined)
      throw new Error(`${file}: ${list}[${index}] is out of order`);
    if (tail) {
      if (list === 'KEYS') throw new Error(`${file}: KEYS cannot have a tail (the file name counts them)`);
      header.rest = name;
    } else names.push(name!);
  }
  return header;
}

/** The code without its comments (a `--` inside a string literal is not used by any script). */
function code(source: string): string {
  return source.replace(/--\[\[[\s\S]*?\]\]/g, '').replace(/--.*$/gm, '');
}

/** The kinds a script's code returns: `return {'kind', ...}` (or `answer = {'kind'}`), `return 1`, `return {0, ...}`. */
function returnedKinds(lua: string): { strings: Set<string>; codes: Set<number> } {
  const body = code(lua);
  const strings = new Set([...body.matchAll(/(?:\breturn|\banswer\s*=)\s*\{\s*'([\w-]+)'/g)].map((m) => m[1]!));
  const codes = new Set(
    [...body.matchAll(/\breturn\s+(-?\d+)\s*(?=\bend\b|$)/gm), ...body.matchAll(/\breturn\s*\{\s*(-?\d+)\s*,/g)].map(
      (m) => Number(m[1]),
    ),
  );
  return { strings, codes };
}

const contracts = new Map<string, ScriptContract>();
for (const c of scriptContracts()) {
  if (contracts.has(c.file)) throw new Error(`${c.file} has two wrappers`);
  contracts.set(c.file, c);
}

describe('script contracts: each Lua command and its typed wrapper', () => {
  it('every command under src/redis/commands has one wrapper, and every wrapper a command', () => {
    expect(files.length).toBeGreaterThan(30);
    expect([...contracts.keys()].sort()).toEqual(files);
  });

  describe.each(files)('%s', (file) => {
    const source = readFileSync(new URL(`${file}.lua`, dir), 'utf8');
    const header = parseHeader(file, source);
    const wrapper = contracts.get(file)!;

    it('names the KEYS and ARGV its wrapper passes, by count, order and name', () => {
      expect(header.keys.length, 'the file name counts the KEYS').toBe(Number(/-(\d+)$/.exec(file)?.[1]));
      expect([...wrapper.keys], 'KEYS').toEqual(header.keys);
      expect([...wrapper.args], 'ARGV').toEqual(header.args);
      expect(wrapper.rest, 'the ARGV tail').toBe(header.rest);
    });

    it('reads no KEYS or ARGV its header does not name', () => {
      const body = code(wrapper.source);
      const highest = (list: string) =>
        Math.max(0, ...[...body.matchAll(new RegExp(`\\b${list}\\[(\\d+)\\]`, 'g'))].map((m) => Number(m[1])));
      expect(highest('KEYS')).toBeLessThanOrEqual(header.keys.length);
      expect(highest('ARGV')).toBeLessThanOrEqual(header.args.length + (header.rest ? 1 : 0));
    });

    it('returns only kinds its wrapper knows, each named in the header', () => {
      const { strings, codes } = returnedKinds(wrapper.source);
      const declared = wrapper.kinds ?? [];
      const declaredStrings = declared.filter((k) => typeof k === 'string');
      if (declaredStrings.length > 0 || strings.size > 0) {
        // A kind the script returns and the wrapper does not know, or one the wrapper waits for in vain.
        expect([...strings].sort(), 'the kinds returned').toEqual([...declaredStrings].sort());
        for (const kind of declaredStrings)
          expect(header.text, `the header names {'${kind}', ...}`).toMatch(new RegExp(`\\{\\s*'${kind}'`));
      } else if (wrapper.kinds !== undefined) {
        for (const n of codes) expect(declared, `return ${n}`).toContain(n);
      }
    });
  });

  it('the wrappers know the refusal reasons and the counts the scripts answer', () => {
    const include = (name: string) => code(readFileSync(new URL(`includes/${name}.lua`, dir), 'utf8'));
    const reasons = new Set([
      ...[...include('send-fence').matchAll(/\{'refused', '(\w+)'\}/g)].map((m) => m[1]!),
      ...[...include('row-results').matchAll(/\breturn '(\w+)'/g)].map((m) => m[1]!),
    ]);
    expect(reasons.size).toBeGreaterThan(4);
    for (const reason of reasons) expect(REFUSAL_REASONS, reason).toContain(reason);
    const counts = /local COUNTS = \{([^}]*)\}/.exec(include('row-results'))?.[1] ?? '';
    expect([...counts.matchAll(/'(\w+)'/g)].map((m) => m[1])).toEqual([...COUNT_NAMES]);
  });
});

describe('the contract test itself', () => {
  it('finds a kind the wrapper does not know, and a header line it cannot read', () => {
    expect([
      ...returnedKinds("if x then return {'wait', 1} end\nlocal answer = {'gone'}\nreturn {'send'}").strings,
    ]).toEqual(['wait', 'gone', 'send']);
    expect([...returnedKinds('if x then return -1 end\nreturn {2, f}\nreturn 1').codes].sort()).toEqual([-1, 1, 2]);
    expect(() => parseHeader('x-1', '--[[\n  KEYS[1..2] a, b\n]]')).toThrow(/cannot read/);
    expect(() => parseHeader('x-1', '--[[\n  KEYS[1] a\n  ARGV[2] b\n]]')).toThrow(/out of order/);
    expect(parseHeader('x-1', '--[[\n  KEYS[1] a  the a\n  ARGV[1] b\n  ARGV[2..] rows  the rest\n]]')).toMatchObject({
      keys: ['a'],
      args: ['b'],
      rest: 'rows',
    });
  });

  it('a wrapper turns a reply into its typed value, and refuses a kind it does not know', () => {
    const reply = kindReply({ wait: { ms: asNumber }, refused: { reason: asString }, done: {} });
    expect(reply.kinds).toEqual(['wait', 'refused', 'done']);
    expect(reply.decode(['wait', 12], 'x-1')).toEqual({ kind: 'wait', ms: 12 });
    expect(reply.decode(['refused', 'lock'], 'x-1')).toEqual({ kind: 'refused', reason: 'lock' });
    expect(reply.decode(['done'], 'x-1')).toEqual({ kind: 'done' });
    expect(() => reply.decode(['sent', '1'], 'x-1')).toThrow(/x-1 answered \{sent, 1\}/);
    expect(() => reply.decode(1, 'x-1')).toThrow(expect.objectContaining({ code: 'RESULT_UNREADABLE' }));
    expect(codeReply([-1, 0, 1]).decode(-1, 'x-1')).toBe(-1);
    expect(() => codeReply([0, 1]).decode(2, 'x-1')).toThrow(/answered 2/);
    expect(flagReply.decode(1, 'x-1')).toBe(true);
    expect(() => flagReply.decode('OK', 'x-1')).toThrow(/answered OK/);
    const coded = codedListReply([0, 2], (code, [, n]) => ({ code, n: asNumber(n) }));
    expect(coded.decode([2, 5], 'x-1')).toEqual({ code: 2, n: 5 });
    expect(() => coded.decode([1, 5], 'x-1')).toThrow(/answered \{1, 5\}/);
  });
});

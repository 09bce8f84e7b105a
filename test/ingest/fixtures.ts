import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll } from 'vitest';
import type { SourceItem, SourceReader } from '../../src/ingest/index.js';

/** A temp dir per test file, removed afterwards; `write` puts a fixture in it. */
export function fixtureDir(): {
  write: (name: string, content: string | Uint8Array) => Promise<string>;
  path: (name: string) => string;
} {
  let dir = '';
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'crm-sync-ingest-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });
  return {
    path: (name) => join(dir, name),
    write: async (name, content) => {
      const p = join(dir, name);
      await writeFile(p, content);
      return p;
    },
  };
}

export async function collect<T>(source: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const item of source) out.push(item);
  return out;
}

/** Plain copies, so assertions compare data and not the readers' null-prototype objects. */
export function plain(items: SourceItem[]): SourceItem[] {
  return JSON.parse(JSON.stringify(items)) as SourceItem[];
}

/** The error the iterator throws (fails the test when nothing is thrown). */
export async function iterationError(reader: SourceReader | AsyncIterable<unknown>): Promise<unknown> {
  try {
    await collect(reader);
  } catch (err) {
    return err;
  }
  throw new Error('expected the iteration to throw');
}

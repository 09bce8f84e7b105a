import { parse } from 'csv-parse/sync';
import { describe, expect, it } from 'vitest';
import { CsvTokenizer, type CsvRawRecord } from '../../src/ingest/csv-tokenizer.js';
import { Prng } from '../../src/sim/prng.js';

/**
 * Differential test of our CSV tokenizer against csv-parse on random well-formed files: CRLF,
 * LF and CR as record ends and inside quoted fields, quotes, delimiters, non-ASCII text, fed
 * in small chunks. csv-parse counts a CRLF inside quotes as two lines, so line numbers are
 * counted here from its `raw` text of each record (a CRLF is one line break, as editors show).
 */
const BREAKS = ['\n', '\r\n', '\r'];
const PLAIN = ['a', 'b', 'Zoë', 'x y', '1', '-', '€', '😀', ' '];
const QUOTED_ONLY = [',', '"', '\n', '\r\n', '\r', ';'];

function randomField(prng: Prng): { text: string; quoted: boolean } {
  const quoted = prng.next() < 0.4;
  const parts: string[] = [];
  const length = Math.floor(prng.next() * 6);
  for (let i = 0; i < length; i++) {
    const pool = quoted && prng.next() < 0.4 ? QUOTED_ONLY : PLAIN;
    parts.push(pool[Math.floor(prng.next() * pool.length)] as string);
  }
  return { text: parts.join(''), quoted };
}

function randomFile(prng: Prng): { text: string; records: string[][] } {
  const columns = 1 + Math.floor(prng.next() * 4);
  const rows = 1 + Math.floor(prng.next() * 12);
  const records: string[][] = [];
  let text = '';
  for (let r = 0; r < rows; r++) {
    const fields = Array.from({ length: columns }, () => randomField(prng));
    // One unquoted blank field would be a blank line, which both sides skip: not a record.
    if (columns === 1 && !fields[0]!.quoted && fields[0]!.text.trim() === '') fields[0] = { text: 'v', quoted: false };
    records.push(fields.map((f) => f.text));
    text += fields.map((f) => (f.quoted ? `"${f.text.replaceAll('"', '""')}"` : f.text)).join(',');
    if (r < rows - 1 || prng.next() < 0.5) text += BREAKS[Math.floor(prng.next() * BREAKS.length)];
  }
  return { text, records };
}

/** Splits at code point boundaries, as a streaming UTF-8 decoder hands text over. */
function chunks(text: string, prng: Prng, maxSize: number): string[] {
  const points = [...text];
  const out: string[] = [];
  for (let i = 0; i < points.length;) {
    const size = 1 + Math.floor(prng.next() * maxSize);
    out.push(points.slice(i, i + size).join(''));
    i += size;
  }
  return out;
}

function lineBreaks(text: string): number {
  return (text.match(/\r\n|\r|\n/g) ?? []).length;
}

function ours(text: string, prng: Prng, maxChunk: number): CsvRawRecord[] {
  const tokenizer = new CsvTokenizer({ delimiter: ',', maxRecordBytes: 1 << 20 });
  const out: CsvRawRecord[] = [];
  for (const chunk of chunks(text, prng, maxChunk)) tokenizer.push(chunk, out);
  tokenizer.end(out);
  return out;
}

function theirs(text: string): Array<{ line: number; fields: string[] }> {
  const parsed = parse(text, {
    raw: true,
    record_delimiter: ['\r\n', '\n', '\r'],
    relax_column_count: true,
  }) as unknown as Array<{ record: string[]; raw: string }>;
  let line = 1;
  return parsed.map(({ record, raw }) => {
    const start = line;
    line += lineBreaks(raw);
    return { line: start, fields: record };
  });
}

describe('CSV tokenizer vs csv-parse (differential)', () => {
  it('gives the same fields and the same starting lines on 400 random well-formed files in chunks of 1-7 characters', () => {
    const prng = new Prng(20261124);
    let records = 0;
    let quotedBreaks = 0;
    for (let i = 0; i < 400; i++) {
      const { text, records: written } = randomFile(prng);
      const expected = theirs(text);
      const got = ours(text, prng, 1 + (i % 7));
      expect(
        got.filter((r) => r.error !== undefined),
        JSON.stringify(text),
      ).toEqual([]);
      expect(
        got.map((r) => r.fields),
        JSON.stringify(text),
      ).toEqual(expected.map((r) => r.fields));
      expect(
        got.map((r) => r.line),
        JSON.stringify(text),
      ).toEqual(expected.map((r) => r.line));
      // The generator's own records agree too, so a bug both parsers share would still show.
      expect(
        got.map((r) => r.fields),
        JSON.stringify(text),
      ).toEqual(written);
      records += got.length;
      quotedBreaks += written.flat().filter((f) => /[\r\n]/.test(f)).length;
    }
    // The files did exercise what the test is about.
    expect(records).toBeGreaterThan(1000);
    expect(quotedBreaks).toBeGreaterThan(200);
  });
});

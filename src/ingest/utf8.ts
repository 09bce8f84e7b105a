/** Byte-level helpers for the UTF-8 checks of text-chunks.ts. */

export interface SniffResult {
  /** Bytes of UTF-8 BOM to drop (0 or 3). */
  bomLength: number;
  /** Set when the file is clearly not UTF-8: the sentence shown to the user. */
  problem?: string;
}

const SAVE_AS = 'save it as UTF-8 (CSV UTF-8 in Excel)';

/** Looks at the first chunk: BOMs, and the NUL bytes that UTF-16 without a BOM is full of. */
export function sniffEncoding(head: Uint8Array): SniffResult {
  const [b0, b1, b2, b3] = head;
  if (b0 === 0xef && b1 === 0xbb && b2 === 0xbf) return { bomLength: 3 };
  if ((b0 === 0xff && b1 === 0xfe && b2 === 0 && b3 === 0) || (b0 === 0 && b1 === 0 && b2 === 0xfe && b3 === 0xff)) {
    return { bomLength: 0, problem: `the file is UTF-32; ${SAVE_AS}` };
  }
  if ((b0 === 0xff && b1 === 0xfe) || (b0 === 0xfe && b1 === 0xff)) {
    return { bomLength: 0, problem: `the file is UTF-16; ${SAVE_AS}` };
  }
  const sample = head.subarray(0, 4096);
  let nuls = 0;
  for (const b of sample) if (b === 0) nuls++;
  // Text in UTF-8 has no NULs; UTF-16 of Latin text is about half NULs. A tenth is a safe line.
  if (sample.length >= 4 && nuls * 10 >= sample.length) {
    return { bomLength: 0, problem: `the file looks like UTF-16 (it is full of NUL bytes); ${SAVE_AS}` };
  }
  return { bomLength: 0 };
}

/**
 * Index of the first byte that breaks UTF-8 in `bytes`, or -1 when only the end is an
 * unfinished sequence. Leading continuation bytes are skipped: they may finish a sequence that
 * began in the previous chunk, which the streaming decoder already accepted.
 */
export function firstInvalidUtf8(bytes: Uint8Array): number {
  let i = 0;
  while (i < 3 && i < bytes.length && (bytes[i]! & 0xc0) === 0x80) i++;
  const n = bytes.length;
  while (i < n) {
    const b = bytes[i]!;
    if (b < 0x80) {
      i++;
      continue;
    }
    let need: number;
    let lo = 0x80;
    let hi = 0xbf;
    if (b >= 0xc2 && b <= 0xdf) need = 1;
    else if (b === 0xe0) [need, lo] = [2, 0xa0];
    else if (b === 0xed) [need, hi] = [2, 0x9f];
    else if (b >= 0xe1 && b <= 0xef) need = 2;
    else if (b === 0xf0) [need, lo] = [3, 0x90];
    else if (b >= 0xf1 && b <= 0xf3) need = 3;
    else if (b === 0xf4) [need, hi] = [3, 0x8f];
    else return i;
    for (let k = 1; k <= need; k++) {
      if (i + k >= n) return -1;
      const c = bytes[i + k]!;
      const min = k === 1 ? lo : 0x80;
      const max = k === 1 ? hi : 0xbf;
      if (c < min || c > max) return i;
    }
    i += need + 1;
  }
  return -1;
}

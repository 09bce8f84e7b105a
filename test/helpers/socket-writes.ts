import type { Duplex } from 'node:stream';

/** A socket's writes to the system, counted: `_write` (one chunk) and `_writev` (the chunks a cork held). */
export interface SocketWrites {
  single: number;
  batched: number;
  chunks: number;
}

/**
 * Counts `stream`'s writes from now on, where the socket hands them to the system: Node's
 * stream implementer methods, which every write passes.
 */
export function countSocketWrites(stream: Duplex): SocketWrites {
  const count: SocketWrites = { single: 0, batched: 0, chunks: 0 };
  const target = stream as Duplex & {
    _write: (...args: unknown[]) => void;
    _writev: (chunks: unknown[], ...rest: unknown[]) => void;
  };
  const single = target._write.bind(stream);
  const batched = target._writev.bind(stream);
  target._write = (...args: unknown[]) => {
    count.single += 1;
    count.chunks += 1;
    single(...args);
  };
  target._writev = (chunks: unknown[], ...rest: unknown[]) => {
    count.batched += 1;
    count.chunks += chunks.length;
    batched(chunks, ...rest);
  };
  return count;
}

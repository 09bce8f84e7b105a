import { InvalidArgumentError } from 'commander';

/** commander argument parser for positive integers, with a message that names the option. */
export function positiveInt(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new InvalidArgumentError('must be a whole number of 1 or more');
  return n;
}

/** Comma-separated list, e.g. `--workspace acme,globex`. */
export function list(value: string, previous: string[] = []): string[] {
  return [
    ...previous,
    ...value
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean),
  ];
}

/** Comma-separated row numbers and ranges: `3,7,10-12`. */
export function rowList(value: string): number[] {
  const rows: number[] = [];
  for (const part of value.split(',')) {
    const m = /^\s*(\d+)\s*(?:-\s*(\d+)\s*)?$/.exec(part);
    if (!m) throw new InvalidArgumentError(`"${part}" is not a row number or range like 10-12`);
    const from = Number(m[1]);
    const to = m[2] !== undefined ? Number(m[2]) : from;
    if (to < from || to - from > 1_000_000) throw new InvalidArgumentError(`bad range "${part}"`);
    for (let r = from; r <= to; r++) rows.push(r);
  }
  return rows;
}

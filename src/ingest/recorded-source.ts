import { statSync } from 'node:fs';
import { FileSource } from './file-source.js';
import type { RecordedSource, Source } from './source.js';

/**
 * Why a run's source cannot be read again for a resume, by its kind: a query would not give
 * the same rows in the same order again. Undefined: its rows come again under the same numbers.
 */
export function resumeRefusal(recorded: RecordedSource): string | undefined {
  if (recorded.options.query === undefined) return undefined;
  return 'its rows came from a database query, which would not give the same rows in the same order again; import (or sync) again: a reconciled run sends only what still differs';
}

/**
 * How a file run's source differs from when the run began (it cannot be read any more, or its
 * size or mtime moved), as a reason a resume is refused; undefined when it is the same.
 */
export function sourceChange(recorded: RecordedSource): string | undefined {
  if (recorded.options.query !== undefined) return undefined;
  let size: number;
  let mtime: number;
  try {
    const st = statSync(recorded.source);
    size = st.size;
    mtime = Math.floor(st.mtimeMs);
  } catch {
    return `its file ${recorded.source} cannot be read any more`;
  }
  const { sourceSize, sourceMtimeMs } = recorded.options;
  if ((sourceSize !== undefined && size !== sourceSize) || (sourceMtimeMs !== undefined && mtime !== sourceMtimeMs))
    return `${recorded.source} changed since the run began; import the new file as a run of its own`;
  return undefined;
}

/** The column a run's rows are named by besides the fields (a query's key column), read from its record. */
export function recordedKeyColumn(recorded: Pick<RecordedSource, 'options'>): string | undefined {
  return recorded.options.query?.keyColumn;
}

/** A resumable run's source read again as the run read it (format, delimiter); check resumeRefusal first. */
export function reopenSource(recorded: RecordedSource): Source {
  const { format, delimiter } = recorded.options;
  return new FileSource(recorded.source, {
    ...(format ? { format } : {}),
    ...(delimiter ? { delimiter } : {}),
  });
}

/** What a caller names a source by: a path (a file, read with `options`) or a Source already opened. */
export function asSource(source: string | Source, options: ConstructorParameters<typeof FileSource>[1] = {}): Source {
  return typeof source === 'string' ? new FileSource(source, options) : source;
}

import { rmSync, statSync } from 'node:fs';
import { sniffCsvLayout } from './csv-dialect.js';
import { openSource } from './open-source.js';
import type { Source, SourceFacts } from './source.js';
import type { ReadSourceOptions, SourceReader } from './source-types.js';

/** A file's size and whole-ms mtime now (nothing when it is not a readable file): what a resume compares. */
export function fileIdentity(path: string): Pick<SourceFacts, 'sourceSize' | 'sourceMtimeMs'> {
  try {
    const st = statSync(path);
    return st.isFile() ? { sourceSize: st.size, sourceMtimeMs: Math.floor(st.mtimeMs) } : {};
  } catch {
    return {};
  }
}

/**
 * A CSV, NDJSON or JSON file as a Source (stdin is one too: a copy spooled to a file, see
 * stdin-spool.ts). Its reader is opened on first use, so option mistakes and a file that can
 * never be a row source are thrown where the rows are first asked for, not where it is named.
 */
export class FileSource implements Source {
  readonly noun = 'file' as const;
  readonly resumable = true;
  /** A file's rows are named by their line. */
  readonly keyColumn = undefined;
  #reader: SourceReader | undefined;

  constructor(
    readonly label: string,
    private readonly options: ReadSourceOptions = {},
    /** Made for this read alone (stdin's copy): removed when no run reads it. */
    private readonly spooled = false,
  ) {}

  get reader(): SourceReader {
    this.#reader ??= openSource(this.label, this.options);
    return this.#reader;
  }

  facts(): SourceFacts {
    const { format, delimiter } = this.reader;
    return {
      ...(format !== 'postgres' ? { format } : {}),
      // The delimiter read with (given or sniffed), so a resume reads the file the same way.
      ...(delimiter !== undefined ? { delimiter } : {}),
      ...(format === 'csv' ? sniffCsvLayout(this.label) : {}),
      ...fileIdentity(this.label),
    };
  }

  commandWords(quote: (word: string) => string): string {
    return quote(this.label);
  }

  close({ used }: { used: boolean }): Promise<string | undefined> {
    if (used || !this.spooled) return Promise.resolve(undefined);
    rmSync(this.label, { force: true });
    return Promise.resolve(`no run read ${this.label}: removed`);
  }
}

/** A file to read as rows; `options` as openSource's (format, delimiter, limits). */
export function openFileSource(path: string, options: ReadSourceOptions = {}): FileSource {
  return new FileSource(path, options);
}

export {
  DEFAULT_MAX_COLUMNS,
  DEFAULT_MAX_RECORD_BYTES,
  RAW_TEXT_KEY,
  columnsUpFront,
  type QuerySourceSpec,
  type ReadSourceOptions,
  type SourceFormat,
  type SourceKind,
  type SourceItem,
  type SourceProblem,
  type SourceReader,
  type SourceRecord,
} from './source-types.js';
export { openSource } from './open-source.js';
export { spoolStdin, openStdinSource, STDIN_SPOOL_DIR } from './stdin-spool.js';
export { type Source, type SourceFacts, type RecordedSource } from './source.js';
export { FileSource, openFileSource, fileIdentity } from './file-source.js';
export { asSource, recordedKeyColumn, reopenSource, resumeRefusal, sourceChange } from './recorded-source.js';
export {
  openSourceSpec,
  resolveSpecFile,
  sourceSpecText,
  type SourceSpec,
  type SourceSpecContext,
} from './source-spec.js';
export {
  PostgresSourceReader,
  openPostgresSource,
  openQuerySource,
  describeDatabase,
  scrubSecret,
  type DatabaseUrlSource,
  type PostgresSourceSettings,
} from './postgres-reader.js';
export {
  COLUMN_TYPES,
  COMPARE_MODES,
  ColumnTypeSchema,
  CompareModeSchema,
  EMPTY_CELL_POLICIES,
  EmptyCellPolicySchema,
  MappingSchema,
  LookupSchema,
  ON_UNKNOWN,
  OnUnknownSchema,
  WRITE_POLICIES,
  WritePolicySchema,
  fieldsOf,
  inferType,
  loadMapping,
  parseMapping,
  readMappingFile,
  type ColumnType,
  type CompareMode,
  type EmptyCellPolicy,
  type Mapping,
  type OnUnknown,
  type WritePolicy,
} from './mapping.js';
export { ROW_FIELD, rowCodeOf, type FieldError, type ReferenceCode } from './field-error.js';
export { type ResolvedName } from './reference-cells.js';
export { loadLookupTable, type LookupSpec, type LookupTable } from './lookup-table.js';
export { validateRow } from './validate-row.js';
export {
  RowDecoder,
  labelOf,
  type HeaderProblem,
  type IngestedRow,
  type MappedValues,
  type RowDecoderOptions,
} from './row-decoder.js';
export { nearest, didYouMean } from './did-you-mean.js';
export { suggestMapping, type ColumnSuggestion, type SuggestionSource } from './mapping-suggest.js';
export { ingest, checkSource, type CheckedSource, type IngestOptions, type LoadReferences } from './ingest.js';
export { fieldTable } from './field-table.js';
export {
  DEFAULT_CSV_DIALECT,
  csvDialectOf,
  sniffCsvLayout,
  stringifyOptions,
  type CsvDialect,
  type DialectFacts,
} from './csv-dialect.js';

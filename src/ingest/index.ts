export {
  DEFAULT_MAX_COLUMNS,
  DEFAULT_MAX_RECORD_BYTES,
  RAW_TEXT_KEY,
  type ReadSourceOptions,
  type SourceFormat,
  type SourceItem,
  type SourceProblem,
  type SourceReader,
  type SourceRecord,
} from './source-types.js';
export { openSource } from './open-source.js';
export {
  COLUMN_TYPES,
  ColumnTypeSchema,
  MappingSchema,
  fieldsOf,
  inferType,
  loadMapping,
  parseMapping,
  readMappingFile,
  type ColumnType,
  type Mapping,
} from './mapping.js';
export { mapRow } from './map-row.js';
export { ROW_FIELD, validateRow } from './validate-row.js';
export { ingest, ingestValues, type IngestOptions, type IngestedRow } from './ingest.js';

export {
  KINDS_OF_LIST,
  REFERENCE_FIELDS,
  REFERENCE_KINDS,
  ReferenceCollector,
  ReferenceIndex,
  ReferencePassSchema,
  normaliseReferenceName,
  readsAsName,
  type ReferenceEntry,
  type ReferenceKind,
  type ReferencePass,
  type Resolution,
  type StageReference,
} from './reference-index.js';
export { ReferenceStore } from './reference-store.js';
export {
  readReferencePass,
  readReferences,
  type ReadReferencesOptions,
  type ReadReferencesResult,
} from './read-references.js';
export {
  referenceStoreOf,
  workspaceReferenceLoader,
  workspaceReferences,
  type WorkspaceReferencesOptions,
} from './workspace-references.js';

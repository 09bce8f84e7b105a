export {
  DuplicateSafeCreate,
  createFingerprint,
  type DuplicateSafeCreateOptions,
  type CreateOutcome,
  type CreateRow,
} from './duplicate-safe-create.js';
export { DealLookup, sendWindow, sentValues, type DealLookupOptions, type LookupAnswer } from './deal-lookup.js';

/*
 * The run store's light surface: the store and its types, for store-only commands (`runs
 * list`) that must not load what index.ts does besides (retention's file sources: pg).
 * Everything here is also in index.ts.
 */
export { RunStore } from './run-store.js';
export { newRunId } from './run-id.js';
export { FINAL_ROW_STATUSES } from './run-types.js';
export type * from './run-types.js';
export { skippedWords, plural } from './count-words.js';

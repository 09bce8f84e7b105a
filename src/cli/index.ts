/*
 * The CLI's surface: its exit codes (the library follows a run with lifecycle's followRun). The
 * bin entry reads light.ts, which loads no action.
 */
export { EXIT } from './exit-codes.js';

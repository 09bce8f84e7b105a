/*
 * What the CLI offers the library's users: following a run with progress as `import --wait`
 * does. The bin entry reads light.ts instead, which loads no action.
 */
export { followRun, type FollowRunOptions } from './run-progress.js';
export { EXIT } from './exit-codes.js';

export {
  SharedTokenBucket,
  workspaceRequestBudget,
  type RequestBudget,
  type SharedTokenBucketOptions,
} from './token-bucket.js';
export type { TokenWait } from './token-waits.js';

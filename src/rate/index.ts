export {
  SharedTokenBucket,
  workspaceRequestBudget,
  type RequestBudget,
  type TokenWait,
  type SharedTokenBucketOptions,
} from './token-bucket.js';

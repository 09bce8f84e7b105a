export {
  SharedTokenBucket,
  workspaceRequestBudget,
  type RequestBudget,
  type SharedTokenBucketOptions,
} from './token-bucket.js';

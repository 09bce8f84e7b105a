export {
  SharedTokenBucket,
  workspaceRequestBudget,
  type RequestBudget,
  type SharedTokenBucketOptions,
} from './token-bucket.js';
export type { TokenWait } from './token-waits.js';
export type { CarriedWait } from './token-bucket.js';
export {
  CLAIM_ARGS,
  CLAIM_KEYS,
  NO_CLAIM,
  claimKeys,
  claimedFrom,
  type CarriedClaim,
  type ClaimKeys,
  type Claimed,
} from './token-bucket-scripts.js';

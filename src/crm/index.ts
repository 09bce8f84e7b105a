export * from './request-bodies.js';
export { EmailSchema, emailProblem, isValidEmail } from './email-address.js';
export * from './operations.js';
export {
  TagSchema,
  DealSchema,
  LeadSchema,
  ContactSchema,
  PaginationSchema,
  DealResponseSchema,
  LeadResponseSchema,
  ContactResponseSchema,
  TeamMembersResponseSchema,
  RECORD_SCHEMAS,
  listPageSchema,
  tagIdOf,
  tagNameOf,
  type Tag,
  type Deal,
  type Lead,
  type Contact,
  type Pagination,
  type ListPage,
  type RecordOf,
} from './records.js';
export {
  CrmError,
  AuthError,
  RateLimitedError,
  TransientError,
  NotFoundError,
  RejectedError,
  BadResponseError,
  isPermanent,
  isPermanentCode,
  isRetryable,
  parseRetryAfter,
  refusedKeyStatus,
  toCrmError,
  type CrmErrorCode,
  type CrmErrorInit,
  type CrmFailure,
  type CrmRequestContext,
} from './errors.js';
export { CrmClient, type CrmClientOptions, type ListPageOptions, type CallOptions } from './crm-client.js';
export { paginate, DEFAULT_RATE_LIMIT_WAIT_MS, type PagerOptions, type FetchPage } from './pager.js';
export { isLoopbackName, loopbackLookup } from './loopback-lookup.js';
// Here, not in runtime/: `plan` makes a client without loading the queues runtime/index.ts opens.
export { createCrmClient } from './client-factory.js';

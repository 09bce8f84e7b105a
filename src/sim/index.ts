export { startSimulator, workspaceFromHost, type Simulator } from './simulator.js';
export type { SimWorkspace } from './sim-workspace.js';
export {
  DEFAULT_ROLES,
  SimFaultsSchema,
  SimRateLimitSchema,
  SimWorkspaceOptionsSchema,
  type SimFaults,
  type SimRateLimit,
  type SimulatorOptions,
  type SimWorkspaceOptions,
} from './sim-options.js';
export {
  DEAL_STATUSES,
  LEAD_STATUSES,
  type SimCompany,
  type SimContact,
  type SimDeal,
  type SimLead,
  type SimOwner,
  type SimPipeline,
  type SimResource,
  type SimStage,
  type SimStats,
  type SimTag,
  type SimTeamMember,
} from './sim-records.js';
export type { DirectContactFields, DirectDealFields, DirectLeadFields } from './body-schemas.js';
export type { ContactJson, DealJson, LeadJson, RefJson, TagJson } from './renderers.js';
export { formatPrice } from './renderers.js';
export { AUTH_ERROR } from './answer.js';
export { MAX_EMAILS_PER_REQUEST } from './team-members.js';
export { DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE } from './record-handlers.js';
export { TokenBucket } from './token-bucket.js';
export { parseRateLimit } from './rate-spec.js';

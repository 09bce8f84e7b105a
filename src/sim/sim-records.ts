/**
 * The simulator's internal state. Fields use the request-body names (`owner_id`, `tag_ids`…) so
 * tests can reason in the API's terms; the spec-shaped answers are built by the renderers.
 */

export interface SimOwner {
  id: string;
  name: string;
  email: string;
}
export interface SimPipeline {
  id: string;
  name: string;
}
export interface SimStage {
  id: string;
  name: string;
  pipelineId: string;
}
export interface SimTag {
  id: string;
  name: string;
  style: string;
}
export interface SimCompany {
  id: string;
  name: string;
  domain: string;
}

export const DEAL_STATUSES = ['in_progress', 'won', 'lost'] as const;
export const LEAD_STATUSES = ['open', 'converted', 'archived'] as const;
export type SimDealStatus = (typeof DEAL_STATUSES)[number];
export type SimLeadStatus = (typeof LEAD_STATUSES)[number];

export interface SimDeal {
  id: string;
  name: string;
  status: SimDealStatus;
  value: number;
  currency: string;
  unique_number: string;
  contact_id: string | null;
  company_id: string | null;
  owner_id: string | null;
  pipeline_id: string | null;
  stage_id: string | null;
  position: number | null;
  tag_ids: string[];
  created_at: string;
  updated_at: string;
}

export interface SimLead {
  id: string;
  name: string;
  status: SimLeadStatus;
  unique_number: string;
  contact_id: string | null;
  company_id: string | null;
  owner_id: string | null;
  tag_ids: string[];
  created_at: string;
  updated_at: string;
}

export interface SimContact {
  id: string;
  name: string;
  email: string;
  phone_number: string;
  company_id: string | null;
  owner_id: string | null;
  tag_ids: string[];
  created_at: string;
  updated_at: string;
}

export interface SimTeamMember {
  email: string;
  role: string;
  invitedBy: string | null;
  invitationEmailSent: boolean;
  addedAt: string;
}

export type SimResource = 'deals' | 'leads' | 'contacts';

/** Reference data every workspace has: the ids that write requests may name. */
export interface SimReferenceData {
  owners: SimOwner[];
  pipelines: SimPipeline[];
  stages: SimStage[];
  tags: SimTag[];
  companies: SimCompany[];
}

export interface SimStats {
  /** Every request whose Host named a known workspace (incl. 401/404/429). */
  requests: number;
  /** Answers sent, by status code (resets and drops send none). */
  byStatus: Record<number, number>;
  /** 429s sent. */
  rateLimited: number;
  /** Writes applied (incl. commit-then-drop ones). `teamMembers` counts requests, `membersAdded` new members. */
  writes: {
    dealCreate: number;
    dealUpdate: number;
    leadUpdate: number;
    contactUpdate: number;
    teamMembers: number;
    membersAdded: number;
  };
  /** List requests answered 200. */
  listPages: number;
  resets: number;
  drops: number;
  errors5xx: number;
}

export function emptyStats(): SimStats {
  return {
    requests: 0,
    byStatus: {},
    rateLimited: 0,
    writes: { dealCreate: 0, dealUpdate: 0, leadUpdate: 0, contactUpdate: 0, teamMembers: 0, membersAdded: 0 },
    listPages: 0,
    resets: 0,
    drops: 0,
    errors5xx: 0,
  };
}

import { randomBytes } from 'node:crypto';
import type { z } from 'zod';
import { CrmSyncError } from '../errors/index.js';
import {
  DirectContactSchema,
  DirectDealSchema,
  DirectLeadSchema,
  describeIssues,
  type DirectContactFields,
  type DirectDealFields,
  type DirectLeadFields,
} from './body-schemas.js';
import { Prng, streamSeed } from './prng.js';
import { writeContact, writeDeal, writeLead, type WorkspaceData, type WriteResult } from './record-writes.js';
import { contactJson, dealJson, leadJson, type ContactJson, type DealJson, type LeadJson } from './renderers.js';
import { generateSeedData } from './seed-data.js';
import {
  DEFAULT_ROLES,
  SimFaultsSchema,
  SimRateLimitSchema,
  SimWorkspaceOptionsSchema,
  type ResolvedSimFaults,
  type SimFaults,
  type SimRateLimit,
  type SimWorkspaceOptions,
} from './sim-options.js';
import {
  emptyStats,
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
import { TokenBucket } from './token-bucket.js';
import { tally } from '../counts/index.js';

/** One simulated workspace: its data, keys and knobs, open to tests for inspection and edits. */
export interface SimWorkspace {
  readonly name: string;
  readonly deals: Map<string, SimDeal>;
  readonly leads: Map<string, SimLead>;
  readonly contacts: Map<string, SimContact>;
  /** Keyed by lower-cased email. */
  readonly teamMembers: Map<string, SimTeamMember>;
  readonly roles: Set<string>;
  /** Live counters. */
  readonly stats: SimStats;
  /** Ids that write requests may name. */
  readonly owners: readonly SimOwner[];
  readonly pipelines: readonly SimPipeline[];
  readonly stages: readonly SimStage[];
  readonly tags: readonly SimTag[];
  readonly companies: readonly SimCompany[];
  addApiKey(key: string): void;
  revokeApiKey(key: string): void;
  /**
   * Team-member requests naming an address at this domain are refused with 422 (as a CRM that
   * refuses disposable domains would): a rejection that client-side validation cannot foresee.
   */
  blockEmailDomain(domain: string): void;
  readonly blockedEmailDomains: ReadonlySet<string>;
  setRateLimit(limit: SimRateLimit | null): void;
  /** Per-workspace override of the global faults (null = use the global ones). */
  setFaults(faults: SimFaults | null): void;
  /** Whether writes store names and emails normalised (SimWorkspaceOptions.normalise). */
  readonly normalise: boolean;
  setNormalise(on: boolean): void;
  resetStats(): void;
  createDeal(fields: DirectDealFields): SimDeal;
  createLead(fields: DirectLeadFields): SimLead;
  createContact(fields: DirectContactFields): SimContact;
  /** Changes a record as a person in the CRM would (bumps `updated_at`); fields use request-body names. */
  updateRecord(resource: SimResource, id: string, patch: Record<string, unknown>): void;
  dealJson(d: SimDeal): DealJson;
  leadJson(l: SimLead): LeadJson;
  contactJson(c: SimContact): ContactJson;
}

const SEED_EPOCH = new Date(Date.UTC(2024, 0, 1)).toISOString();

export class WorkspaceState implements SimWorkspace, WorkspaceData {
  readonly name: string;
  readonly deals = new Map<string, SimDeal>();
  readonly leads = new Map<string, SimLead>();
  readonly contacts = new Map<string, SimContact>();
  readonly teamMembers = new Map<string, SimTeamMember>();
  readonly roles: Set<string>;
  readonly stats: SimStats = emptyStats();
  readonly owners: readonly SimOwner[];
  readonly pipelines: readonly SimPipeline[];
  readonly stages: readonly SimStage[];
  readonly tags: readonly SimTag[];
  readonly companies: readonly SimCompany[];
  readonly ownerById: ReadonlyMap<string, SimOwner>;
  readonly pipelineById: ReadonlyMap<string, SimPipeline>;
  readonly stageById: ReadonlyMap<string, SimStage>;
  readonly tagById: ReadonlyMap<string, SimTag>;
  readonly companyById: ReadonlyMap<string, SimCompany>;
  readonly contactByEmail = new Map<string, string>();
  /** Per-workspace fault override; null = the simulator's global faults. */
  faults: ResolvedSimFaults | null = null;
  normalise: boolean;
  private readonly apiKeys: Set<string>;
  private bucket: TokenBucket | null = null;
  private readonly runtimeIds: Prng;
  private lastStamp = 0;
  /** Records in creation order per resource, rebuilt when a map's size changes (records are never deleted). */
  private readonly orderCache = new Map<SimResource, { size: number; records: object[] }>();
  private dealNumber: number;
  private leadNumber: number;

  constructor(options: SimWorkspaceOptions) {
    const o = SimWorkspaceOptionsSchema.parse(options);
    this.name = o.name;
    this.apiKeys = new Set(o.apiKeys);
    this.roles = new Set(o.roles ?? DEFAULT_ROLES);
    this.normalise = o.normalise;
    const { seed } = o;
    const data = generateSeedData(seed, o.records, o.pipelines);
    ({
      owners: this.owners,
      pipelines: this.pipelines,
      stages: this.stages,
      tags: this.tags,
      companies: this.companies,
    } = data);
    this.ownerById = new Map(data.owners.map((x) => [x.id, x]));
    this.pipelineById = new Map(data.pipelines.map((x) => [x.id, x]));
    this.stageById = new Map(data.stages.map((x) => [x.id, x]));
    this.tagById = new Map(data.tags.map((x) => [x.id, x]));
    this.companyById = new Map(data.companies.map((x) => [x.id, x]));
    for (const c of data.contacts) {
      this.contacts.set(c.id, c);
      this.contactByEmail.set(c.email.toLowerCase(), c.id);
    }
    for (const l of data.leads) this.leads.set(l.id, l);
    for (const d of data.deals) this.deals.set(d.id, d);
    this.dealNumber = data.deals.length;
    this.leadNumber = data.leads.length;
    // The owners are the workspace's first members; the first two administer it.
    data.owners.forEach((owner, i) => {
      const role = i < 2 && this.roles.has('Admin') ? 'Admin' : ([...this.roles][0] ?? 'Standard');
      this.teamMembers.set(owner.email, {
        email: owner.email,
        role,
        invitedBy: null,
        invitationEmailSent: false,
        addedAt: SEED_EPOCH,
      });
    });
    // Seed data repeats with its seed; ids of records created later must not: a real CRM never
    // issues an id twice, and a restarted simulator that did would hand out deal ids the run
    // store already holds claims for (a second `npm run demo` on the same Redis failed its creates).
    this.runtimeIds = new Prng(streamSeed(seed, `runtime:${randomBytes(8).toString('hex')}`));
    this.setRateLimit(o.rateLimit ?? null);
  }

  addApiKey(key: string): void {
    this.apiKeys.add(key);
  }

  revokeApiKey(key: string): void {
    this.apiKeys.delete(key);
  }

  readonly blockedEmailDomains = new Set<string>();

  blockEmailDomain(domain: string): void {
    this.blockedEmailDomains.add(domain.toLowerCase());
  }

  isValidKey(key: string | undefined): boolean {
    return key !== undefined && this.apiKeys.has(key);
  }

  setRateLimit(limit: SimRateLimit | null): void {
    this.bucket = limit === null ? null : new TokenBucket(SimRateLimitSchema.parse(limit));
  }

  /** 0 when the request may proceed, else ms until the bucket has a token. */
  takeToken(): number {
    return this.bucket === null ? 0 : this.bucket.take();
  }

  setFaults(faults: SimFaults | null): void {
    this.faults = faults === null ? null : SimFaultsSchema.parse(faults);
  }

  setNormalise(on: boolean): void {
    this.normalise = on;
  }

  resetStats(): void {
    Object.assign(this.stats, emptyStats());
  }

  countStatus(status: number): void {
    tally(this.stats.byStatus, status);
  }

  /** All records of a resource in creation order (Map insertion order). */
  ordered(resource: SimResource): readonly object[] {
    const map: Map<string, object> = this[resource];
    const cached = this.orderCache.get(resource);
    if (cached && cached.size === map.size) return cached.records;
    const records = [...map.values()];
    this.orderCache.set(resource, { size: map.size, records });
    return records;
  }

  newId(prefix: string): string {
    for (;;) {
      const id = prefix + this.runtimeIds.hex(20);
      if (!this.deals.has(id) && !this.leads.has(id) && !this.contacts.has(id)) return id;
    }
  }

  nextUniqueNumber(kind: 'deal' | 'lead'): string {
    const n = kind === 'deal' ? ++this.dealNumber : ++this.leadNumber;
    return `${kind === 'deal' ? 'D' : 'L'}-${String(n).padStart(6, '0')}`;
  }

  stamp(previous?: string): string {
    const floor = previous === undefined ? 0 : Date.parse(previous) + 1;
    this.lastStamp = Math.max(Date.now(), this.lastStamp + 1, floor);
    return new Date(this.lastStamp).toISOString();
  }

  /** The most recently added admin: the spec's default for `invited_by`. */
  latestAdmin(): string | null {
    let latest: string | null = null;
    for (const m of this.teamMembers.values()) if (m.role === 'Admin') latest = m.email;
    return latest;
  }

  createDeal(fields: DirectDealFields): SimDeal {
    return direct(writeDeal(this, undefined, parse(DirectDealSchema, fields)));
  }

  createLead(fields: DirectLeadFields): SimLead {
    return direct(writeLead(this, undefined, parse(DirectLeadSchema, fields)));
  }

  createContact(fields: DirectContactFields): SimContact {
    return direct(writeContact(this, undefined, parse(DirectContactSchema, fields)));
  }

  updateRecord(resource: SimResource, id: string, patch: Record<string, unknown>): void {
    const missing = (): never => {
      throw new CrmSyncError('USAGE', `simulator workspace ${this.name}: no ${resource} record with id "${id}"`);
    };
    if (resource === 'deals') direct(writeDeal(this, this.deals.get(id) ?? missing(), parse(DirectDealSchema, patch)));
    else if (resource === 'leads')
      direct(writeLead(this, this.leads.get(id) ?? missing(), parse(DirectLeadSchema, patch)));
    else direct(writeContact(this, this.contacts.get(id) ?? missing(), parse(DirectContactSchema, patch)));
  }

  dealJson(d: SimDeal): DealJson {
    return dealJson(this, d);
  }

  leadJson(l: SimLead): LeadJson {
    return leadJson(this, l);
  }

  contactJson(c: SimContact): ContactJson {
    return contactJson(this, c);
  }
}

function parse<T>(schema: z.ZodType<T>, value: unknown): T {
  const result = schema.safeParse(value);
  if (!result.success)
    throw new CrmSyncError('USAGE', `simulator: invalid direct edit: ${describeIssues(result.error)}`);
  return result.data;
}

function direct<T>(result: WriteResult<T>): T {
  if (!result.ok) throw new CrmSyncError('USAGE', `simulator: invalid direct edit: ${result.error}`);
  return result.record;
}

import { Agent as HttpAgent, type IncomingHttpHeaders } from 'node:http';
import { Agent as HttpsAgent } from 'node:https';
import { inspect } from 'node:util';
import got, { type Got, type Method } from 'got';
import type { z } from 'zod';
import { DEFAULTS, type Secret } from '../config/index.js';
import { silentLogger, type Logger } from '../log/index.js';
import { BadResponseError, toCrmError, type CrmFailure, type CrmRequestContext } from './errors.js';
import { loopbackLookup } from './loopback-lookup.js';
import { paginate, type PagerOptions } from './pager.js';
import {
  OPERATION_TABLE,
  operationPath,
  type ListResource,
  type OperationEntry,
  type UpdateOperation,
} from './operation-table.js';
import { responseSchemaOf, type UpdatePayload } from './operations.js';
import {
  TeamMembersResponseSchema,
  listPageSchema,
  type Contact,
  type Deal,
  type Lead,
  type ListPage,
  type RecordOf,
} from './records.js';
import type {
  ContactUpdateFields,
  DealCreateFields,
  DealUpdateFields,
  LeadUpdateFields,
  TeamMembersBody,
} from './request-bodies.js';

export interface CrmClientOptions {
  /** Workspace name, for error context and logs. Required. */
  workspace: string;
  /** Workspace address + `/api/external`, no trailing slash (one is tolerated). Required. */
  baseUrl: string;
  /** The workspace API key; revealed only where the header is set. Required. */
  apiKey: Secret;
  /** Version segment of list endpoints. Default DEFAULTS.workspace.listVersion. */
  listVersion?: 'v1' | 'v2';
  /** Whole-request timeout (ms). Default DEFAULTS.workspace.requestTimeoutMs. */
  timeoutMs?: number;
  /** Timeout to get a connected socket (lookup + connect + TLS; ms). Default DEFAULTS.client.connectTimeoutMs. */
  connectTimeoutMs?: number;
  /** Keep-alive agent size; set it near the worker concurrency. Default DEFAULTS.client.maxSockets. */
  maxSockets?: number;
  /** Default: silent. */
  logger?: Logger;
}

export interface ListPageOptions {
  pageNumber: number;
  pageSize: number;
  /** Default: the client's listVersion. */
  version?: 'v1' | 'v2';
  /** As CallOptions.signal: aborts the request. Default none. */
  signal?: AbortSignal;
}

interface CallSpec<S extends z.ZodType> {
  method: Method;
  /** Relative to baseUrl, e.g. `v2/deals/123`. */
  path: string;
  json?: unknown;
  searchParams?: Record<string, number>;
  schema: S;
  /** Statuses that mean success. Default: any 2xx. */
  okStatuses?: readonly number[];
  signal?: AbortSignal | undefined;
  onWire?: ((at: number) => void) | undefined;
}

/** Per-call options of the write methods. */
export interface CallOptions {
  /**
   * Aborts the request (the worker lost its job): the answer is dropped and the call throws a
   * TransientError (the write may still have been applied). Default none.
   */
  signal?: AbortSignal;
  /**
   * Called once when the request's last byte was handed to the socket (local epoch ms, sub-ms),
   * with none for a request that never got that far. The rate budget's send log keeps a late
   * request's real send time (TokenWait.sent). Default none.
   */
  onWire?: (at: number) => void;
}

/**
 * Typed calls to one workspace of the CRM. One got instance and one keep-alive agent pair
 * per client. got never retries (the worker owns retries, and a retried POST could create a
 * deal twice) and never throws on status: every non-success goes through `toCrmError`.
 */
export class CrmClient {
  readonly workspace: string;
  readonly baseUrl: string;
  readonly #apiKey: Secret;
  readonly #http: Got;
  readonly #agents: { http: HttpAgent; https: HttpsAgent };
  readonly #listVersion: 'v1' | 'v2';
  readonly #logger: Logger;
  readonly #basePath: string;
  readonly #sendWatchers = new Set<(ms: number) => void>();
  /** The CRM's clock minus ours, from the last answer's `Date` header (ms); undefined before one. */
  #clockOffsetMs: number | undefined;
  /** The last `Date` header seen, parsed. */
  #lastDate: { header: string | undefined; ms: number } = { header: undefined, ms: NaN };

  constructor(options: CrmClientOptions) {
    this.workspace = options.workspace;
    this.baseUrl = options.baseUrl.replace(/\/+$/, '');
    this.#apiKey = options.apiKey;
    this.#listVersion = options.listVersion ?? DEFAULTS.workspace.listVersion;
    this.#logger = (options.logger ?? silentLogger).child({ workspace: options.workspace });
    this.#basePath = new URL(`${this.baseUrl}/`).pathname;
    const maxSockets = options.maxSockets ?? DEFAULTS.client.maxSockets;
    this.#agents = {
      http: new HttpAgent({ keepAlive: true, maxSockets }),
      https: new HttpsAgent({ keepAlive: true, maxSockets }),
    };
    const connect = options.connectTimeoutMs ?? DEFAULTS.client.connectTimeoutMs;
    const apiKey = this.#apiKey;
    this.#http = got.extend({
      prefixUrl: `${this.baseUrl}/`,
      headers: { accept: 'application/json', 'user-agent': 'crm-sync' },
      agent: this.#agents,
      dnsLookup: loopbackLookup,
      timeout: {
        request: options.timeoutMs ?? DEFAULTS.workspace.requestTimeoutMs,
        lookup: connect,
        connect,
        secureConnect: connect,
      },
      retry: { limit: 0 },
      throwHttpErrors: false,
      followRedirect: false,
      responseType: 'text',
      hooks: {
        // Set per request rather than in the defaults so the key never sits in the got
        // instance's options (which util.inspect or an error dump could reach).
        beforeRequest: [
          (opts) => {
            opts.headers['x-api-key'] = apiKey.reveal();
          },
        ],
      },
    });
  }

  /** POST v2/deals `{deal}`; the spec does not fix the status, so 201 and 200 both succeed. */
  async createDeal(fields: DealCreateFields, opts: CallOptions = {}): Promise<Deal> {
    return (await this.#write('deal.create', undefined, fields, opts)) as Deal;
  }

  async updateDeal(id: string, fields: DealUpdateFields, opts: CallOptions = {}): Promise<Deal> {
    return (await this.#write('deal.update', id, fields, opts)) as Deal;
  }

  async updateLead(id: string, fields: LeadUpdateFields, opts: CallOptions = {}): Promise<Lead> {
    return (await this.#write('lead.update', id, fields, opts)) as Lead;
  }

  async updateContact(id: string, fields: ContactUpdateFields, opts: CallOptions = {}): Promise<Contact> {
    return (await this.#write('contact.update', id, fields, opts)) as Contact;
  }

  /**
   * Any update operation of the operation table: its request, the written record's id — always
   * the path's. The spec's update answers are the record at the path: an answer naming another
   * id is a CRM fault (BadResponseError with `answeredId`, no `recordId`), never a re-keying of
   * the row's result; the write may have been applied all the same.
   */
  async update(payload: UpdatePayload, opts: CallOptions = {}): Promise<string> {
    return (await this.updateAnswered(payload, opts)).id;
  }

  /**
   * As update, with the record as the CRM answered it: what it holds after the write, which a
   * CRM that normalises values (collapsed spaces, an email's domain lower-cased) stores other
   * than sent (RowResult.changes keeps that, so `runs undo` compares with it).
   */
  async updateAnswered(payload: UpdatePayload, opts: CallOptions = {}): Promise<Deal | Lead | Contact> {
    let answered: Deal | Lead | Contact;
    try {
      answered = (await this.#write(payload.op, payload.id, payload.fields, opts)) as Deal | Lead | Contact;
    } catch (err) {
      if (!(err instanceof BadResponseError) || err.recordId === undefined || err.recordId === payload.id) throw err;
      throw this.#otherRecord(payload, err.recordId, err.status);
    }
    if (answered.id !== payload.id) throw this.#otherRecord(payload, answered.id, undefined);
    return answered;
  }

  #otherRecord(payload: UpdatePayload, answeredId: string, status: number | undefined): BadResponseError {
    const path = this.#pathOf(operationPath(payload.op, payload.id));
    const method = OPERATION_TABLE[payload.op].method;
    return new BadResponseError(
      `${method} ${path} (workspace ${this.workspace}): the answer names record ${JSON.stringify(answeredId)}, not ${JSON.stringify(payload.id)} that was written to`,
      { workspace: this.workspace, method, path, ...(status !== undefined ? { status } : {}), answeredId },
    );
  }

  /** POST v2/team-members (Accept: application/json is a default header); 201 `{message}`. */
  async addTeamMembers(body: TeamMembersBody, opts: CallOptions = {}): Promise<{ message: string }> {
    const { method, path, okStatuses } = OPERATION_TABLE['team.invite'];
    const spec = { method, path, json: body, schema: TeamMembersResponseSchema, okStatuses, ...opts };
    const res = await this.#call(spec);
    return { message: res.message };
  }

  /** The request of an update or create, as the operation table describes it: `{<wrapper>: fields}`. */
  #write(
    op: UpdateOperation | 'deal.create',
    id: string | undefined,
    fields: object,
    opts: CallOptions,
  ): Promise<unknown> {
    const entry: OperationEntry = OPERATION_TABLE[op];
    return this.#call({
      method: entry.method,
      path: operationPath(op, id),
      json: { [entry.wrapper ?? '']: fields },
      schema: responseSchemaOf(op),
      ...(entry.okStatuses ? { okStatuses: entry.okStatuses } : {}),
      signal: opts.signal,
      onWire: opts.onWire,
    });
  }

  /**
   * The CRM's clock now, as far as we can tell: ours shifted by the offset its last `Date`
   * header showed (whole seconds, so about ±1 s), or ours alone before any answer.
   */
  /**
   * Calls `watch` after every request that got an answer with how long it took from the call to
   * the request's last byte on the wire (ms): the rate budget's margin covers it
   * (SharedTokenBucket.noteSendDelay). Returns a function that stops the calls.
   */
  watchSendDelays(watch: (ms: number) => void): () => void {
    this.#sendWatchers.add(watch);
    return () => this.#sendWatchers.delete(watch);
  }

  crmClock(): { at: number; measured: boolean } {
    const offset = this.#clockOffsetMs;
    return offset === undefined ? { at: Date.now(), measured: false } : { at: Date.now() + offset, measured: true };
  }

  /** One page of `GET {version}/{resource}?page_number=&page_size=`, records under `records`. */
  async listPage<R extends ListResource>(resource: R, opts: ListPageOptions): Promise<ListPage<RecordOf<R>>> {
    const version = opts.version ?? this.#listVersion;
    const path = `${version}/${resource}`;
    const searchParams = { page_number: opts.pageNumber, page_size: opts.pageSize };
    const page = await this.#call({
      method: 'GET',
      path,
      searchParams,
      schema: listPageSchema(resource),
      signal: opts.signal,
    });
    // A service that ignores page_number would send page 1 forever and the pager would never end.
    if (page.records.length > 0 && page.pagination.current_page_number !== opts.pageNumber) {
      throw new BadResponseError(
        `GET ${this.#pathOf(path, searchParams)} (workspace ${this.workspace}): answered page ${page.pagination.current_page_number} for page_number=${opts.pageNumber}`,
        { workspace: this.workspace, method: 'GET', path: this.#pathOf(path, searchParams), status: 200 },
      );
    }
    return page;
  }

  /** Every page of a list to its last (pager.ts: paginate), each record once; retries 429 and transient failures. */
  pages<R extends ListResource>(resource: R, opts: PagerOptions = {}): AsyncIterable<ListPage<RecordOf<R>>> {
    const version = opts.version ?? this.#listVersion;
    const fetchPage = (pageNumber: number, pageSize: number) =>
      this.listPage(resource, { pageNumber, pageSize, version });
    return paginate<RecordOf<R>>(fetchPage, opts, { logger: this.#logger, label: `${version}/${resource}` });
  }

  /** The records of `pages()`, one by one. */
  async *records<R extends ListResource>(resource: R, opts: PagerOptions = {}): AsyncIterable<RecordOf<R>> {
    for await (const page of this.pages(resource, opts)) yield* page.records;
  }

  /** Destroys the keep-alive sockets; the client must not be used afterwards. */
  close(): void {
    this.#agents.http.destroy();
    this.#agents.https.destroy();
  }

  toJSON(): { workspace: string; baseUrl: string } {
    return { workspace: this.workspace, baseUrl: this.baseUrl };
  }

  [inspect.custom](): string {
    return `CrmClient { workspace: ${JSON.stringify(this.workspace)}, baseUrl: ${JSON.stringify(this.baseUrl)} }`;
  }

  async #call<S extends z.ZodType>(spec: CallSpec<S>): Promise<z.infer<S>> {
    let statusCode: number;
    let headers: IncomingHttpHeaders;
    let body: string;
    const sentAt = Date.now();
    try {
      // Every key set, undefined where unused: got skips those, and the call builds no spread
      // (one request per row: its per-call work is the pipeline's, bench/throughput.ts).
      const request = this.#http(spec.path, {
        method: spec.method,
        json: spec.json,
        searchParams: spec.searchParams,
        signal: spec.signal,
      });
      const { onWire } = spec;
      // 'finish': the request's last byte went to the socket (got's timings.upload, in whole ms).
      if (onWire) {
        // got's `on` hands back the request promise itself, awaited just below.
        void request.on('request', (req) =>
          req.once('finish', () => onWire(performance.timeOrigin + performance.now())),
        );
      }
      const res = await request;
      ({ statusCode, headers } = res);
      const { upload, start } = res.timings;
      for (const watch of this.#sendWatchers) watch(Math.max(0, (upload ?? start) - sentAt));
      body = res.body as string;
    } catch (error) {
      throw this.#fail({ kind: 'transport', error }, spec);
    }
    this.#noteClock(headers.date, sentAt);
    const ok = spec.okStatuses ? spec.okStatuses.includes(statusCode) : statusCode >= 200 && statusCode < 300;
    if (!ok) throw this.#fail({ kind: 'response', statusCode, headers, body }, spec);
    let json: unknown;
    try {
      json = JSON.parse(body);
    } catch {
      throw this.#fail({ kind: 'invalid', statusCode, problem: 'not-json' }, spec);
    }
    const parsed = spec.schema.safeParse(json);
    if (!parsed.success)
      throw this.#fail({ kind: 'invalid', statusCode, problem: parsed.error, recordId: wrappedId(json) }, spec);
    if (this.#logger.isLevelEnabled('debug'))
      this.#logger.debug(
        { method: spec.method, path: this.#pathOf(spec.path, spec.searchParams), status: statusCode },
        'crm request ok',
      );
    return parsed.data as z.infer<S>;
  }

  /** The server stamped `Date` between our send and now: compare it with the midpoint. */
  #noteClock(date: string | undefined, sentAt: number): void {
    // Whole seconds: most answers repeat the last one's header, parsed once.
    if (date !== this.#lastDate.header)
      this.#lastDate = { header: date, ms: date === undefined ? NaN : Date.parse(date) };
    const server = this.#lastDate.ms;
    if (Number.isNaN(server)) return;
    // Date has whole seconds: the server's true time lies in [server, server + 1000).
    this.#clockOffsetMs = server + 500 - (sentAt + Date.now()) / 2;
  }

  /** The typed error of a failed call; its context is built here, only for failures. */
  #fail(failure: CrmFailure, spec: Pick<CallSpec<z.ZodType>, 'method' | 'path' | 'searchParams'>): Error {
    const ctx: CrmRequestContext = {
      workspace: this.workspace,
      method: spec.method,
      path: this.#pathOf(spec.path, spec.searchParams),
      scrub: (text) => this.#scrub(text),
    };
    const err = toCrmError(failure, ctx);
    this.#logger.debug(
      { method: ctx.method, path: ctx.path, code: err.code, status: err.status },
      'crm request failed',
    );
    return err;
  }

  /** Path + query as the service sees it (e.g. `/api/external/v2/deals?page_number=1`). */
  #pathOf(relative: string, searchParams?: Record<string, number>): string {
    const query = searchParams
      ? `?${new URLSearchParams(Object.entries(searchParams).map(([k, v]): [string, string] => [k, String(v)])).toString()}`
      : '';
    return `${this.#basePath}${relative}${query}`;
  }

  #scrub(text: string): string {
    const key = this.#apiKey.reveal();
    return key.length > 0 ? text.split(key).join('[redacted]') : text;
  }
}

/** The id of `{ <wrapper>: { id } }`, the shape of every write answer, if the body has one. */
function wrappedId(json: unknown): string | undefined {
  if (typeof json !== 'object' || json === null) return undefined;
  for (const value of Object.values(json)) {
    const id = typeof value === 'object' && value !== null ? (value as { id?: unknown }).id : undefined;
    if (typeof id === 'string' && id !== '') return id;
  }
  return undefined;
}

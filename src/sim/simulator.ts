import type { IncomingMessage } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import Fastify, {
  LogController,
  type FastifyBaseLogger,
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
} from 'fastify';
import { CrmSyncError } from '../errors/index.js';
import { silentLogger } from '../log/index.js';
import { AUTH_ERROR, type SimAnswer } from './answer.js';
import { createDeal, listRecords, updateContact, updateDeal, updateLead } from './record-handlers.js';
import {
  EPHEMERAL_PORT,
  SimFaultsSchema,
  type ResolvedSimFaults,
  type SimFaults,
  type SimulatorOptions,
  type SimWorkspaceOptions,
} from './sim-options.js';
import type { SimResource } from './sim-records.js';
import { WorkspaceState, type SimWorkspace } from './sim-workspace.js';
import { addTeamMembers } from './team-members.js';

export interface Simulator {
  readonly port: number;
  /** `http://127.0.0.1:PORT` */
  readonly origin: string;
  /** `http://<workspace>.localhost:PORT/api/external` */
  baseUrl(workspace: string): string;
  /** Throws for an unknown workspace. */
  workspace(name: string): SimWorkspace;
  addWorkspace(options: SimWorkspaceOptions): SimWorkspace;
  /** Global faults, at run time (a workspace's own `setFaults` wins). */
  setFaults(faults: SimFaults): void;
  setLatency(ms: number): void;
  close(): Promise<void>;
}

/** Per-request state the hooks hand to the handler, kept off fastify's types. */
interface RequestState {
  workspace: WorkspaceState | undefined;
  dropAfterCommit: boolean;
}

const PREFIX = '/api/external';
/** Statuses of a simulated server error, one drawn per fault. */
const SIMULATED_5XX = [500, 502, 503] as const;
const RESOURCES: readonly SimResource[] = ['deals', 'leads', 'contacts'];

/**
 * `acme.localhost:4010` → `acme`, and `acme.<domain>` when the simulator is given a domain;
 * anything under neither names no workspace.
 */
export function workspaceFromHost(host: string | undefined, domain?: string): string | undefined {
  if (!host || host.startsWith('[')) return undefined;
  const hostname = (host.split(':')[0] ?? '').toLowerCase().replace(/\.$/, '');
  const under = (d: string) => hostname.endsWith(`.${d.toLowerCase().replace(/\.$/, '')}`);
  if (!under('localhost') && !(domain !== undefined && under(domain))) return undefined;
  return hostname.split('.')[0] || undefined;
}

class SimulatorServer implements Simulator {
  private readonly workspaces = new Map<string, WorkspaceState>();
  private readonly state = new WeakMap<IncomingMessage, RequestState>();
  private faults: ResolvedSimFaults;
  /** Delay before every authenticated answer (ms); absent: none. */
  private latencyMs: number | undefined;
  /** Workspaces also answer as `<name>.<domain>` (a container network's alias); absent: `.localhost` only. */
  private readonly domain: string | undefined;
  port = 0;

  constructor(
    private readonly app: FastifyInstance,
    private readonly host: string,
    options: SimulatorOptions,
  ) {
    this.faults = SimFaultsSchema.parse(options.faults ?? {});
    this.latencyMs = options.latencyMs;
    this.domain = options.domain;
    for (const ws of options.workspaces) this.addWorkspace(ws);
  }

  get origin(): string {
    const host = this.host === '0.0.0.0' || this.host === '::' ? '127.0.0.1' : this.host;
    return `http://${host.includes(':') ? `[${host}]` : host}:${this.port}`;
  }

  baseUrl(workspace: string): string {
    return `http://${this.workspace(workspace).name}.localhost:${this.port}${PREFIX}`;
  }

  workspace(name: string): WorkspaceState {
    const ws = this.workspaces.get(name);
    if (!ws) throw new CrmSyncError('USAGE', `simulator: no workspace named "${name}"`);
    return ws;
  }

  addWorkspace(options: SimWorkspaceOptions): WorkspaceState {
    if (this.workspaces.has(options.name))
      throw new CrmSyncError('USAGE', `simulator: workspace "${options.name}" already exists`);
    const ws = new WorkspaceState(options);
    this.workspaces.set(ws.name, ws);
    return ws;
  }

  setFaults(faults: SimFaults): void {
    this.faults = SimFaultsSchema.parse(faults);
  }

  setLatency(ms: number): void {
    if (!Number.isFinite(ms) || ms < 0)
      throw new CrmSyncError('USAGE', 'simulator: latency must be a number of ms ≥ 0');
    this.latencyMs = ms;
  }

  close(): Promise<void> {
    return this.app.close();
  }

  /** Root hooks: count every request and answer of a known workspace, 404s included. */
  installCounters(): void {
    this.app.addHook('onRequest', async (req) => {
      const ws = this.workspaces.get(workspaceFromHost(req.headers.host, this.domain) ?? '');
      this.state.set(req.raw, { workspace: ws, dropAfterCommit: false });
      if (ws) ws.stats.requests++;
    });
    this.app.addHook('onSend', async (req, reply, payload) => {
      this.state.get(req.raw)?.workspace?.countStatus(reply.statusCode);
      return payload;
    });
  }

  /** Route hook, in the contract's order: auth → rate limit → latency → faults. */
  async gate(req: FastifyRequest, reply: FastifyReply): Promise<FastifyReply | undefined> {
    const st = this.state.get(req.raw);
    const ws = st?.workspace;
    const key = req.headers['x-api-key'];
    if (!st || !ws || !ws.isValidKey(typeof key === 'string' ? key : undefined)) {
      return reply.code(401).send({ error: AUTH_ERROR });
    }
    const waitMs = ws.takeToken();
    if (waitMs > 0) {
      ws.stats.rateLimited++;
      const seconds = Math.max(1, Math.ceil(waitMs / 1000));
      return reply
        .code(429)
        .header('retry-after', String(seconds))
        .send({ error: `Rate limit exceeded, retry in ${seconds} s` });
    }
    if (this.latencyMs !== undefined && this.latencyMs > 0) await sleep(this.latencyMs);
    const faults = ws.faults ?? this.faults;
    if (Math.random() < faults.errorRate) {
      ws.stats.errors5xx++;
      const status = SIMULATED_5XX[Math.floor(Math.random() * SIMULATED_5XX.length)]!;
      return reply.code(status).send({ error: 'Internal server error (simulated)' });
    }
    if (Math.random() < faults.resetRate) {
      ws.stats.resets++;
      return this.destroy(req, reply);
    }
    st.dropAfterCommit = req.method !== 'GET' && Math.random() < faults.commitThenDropRate;
    return undefined;
  }

  /** Sends a handler's answer, unless a commit-then-drop fault swallows an applied write. */
  respond(req: FastifyRequest, reply: FastifyReply, answer: SimAnswer): FastifyReply {
    const st = this.state.get(req.raw);
    if (answer.applied && st?.dropAfterCommit && st.workspace) {
      st.workspace.stats.drops++;
      return this.destroy(req, reply);
    }
    return reply.code(answer.status).send(answer.body);
  }

  private destroy(req: FastifyRequest, reply: FastifyReply): FastifyReply {
    reply.hijack();
    req.raw.socket.destroy();
    return reply;
  }

  /** The spec's endpoints under `/api/external`. */
  installRoutes(): void {
    const ws = (req: FastifyRequest): WorkspaceState => {
      const found = this.state.get(req.raw)?.workspace;
      // gate() answered 401 for every request without a workspace, so this cannot happen.
      if (!found) throw new Error('simulator: route reached without a workspace');
      return found;
    };
    type IdReq = FastifyRequest<{ Params: { id: string } }>;
    this.app.register(
      async (api) => {
        api.addHook('onRequest', (req, reply) => this.gate(req, reply));
        api.post('/v2/deals', async (req, reply) => this.respond(req, reply, createDeal(ws(req), req.body)));
        api.patch('/v2/deals/:id', async (req: IdReq, reply) =>
          this.respond(req, reply, updateDeal(ws(req), req.params.id, req.body)),
        );
        api.patch('/v2/leads/:id', async (req: IdReq, reply) =>
          this.respond(req, reply, updateLead(ws(req), req.params.id, req.body)),
        );
        api.patch('/v2/contacts/:id', async (req: IdReq, reply) =>
          this.respond(req, reply, updateContact(ws(req), req.params.id, req.body)),
        );
        api.post('/v2/team-members', async (req, reply) =>
          this.respond(req, reply, addTeamMembers(ws(req), req.headers.accept, req.body)),
        );
        for (const version of ['v1', 'v2']) {
          for (const resource of RESOURCES) {
            api.get(`/${version}/${resource}`, async (req, reply) =>
              this.respond(req, reply, listRecords(ws(req), resource, req.query as Record<string, unknown>)),
            );
          }
        }
      },
      { prefix: PREFIX },
    );
  }
}

/** Starts a simulator that speaks the spec on real HTTP; `close()` it when done. */
export async function startSimulator(options: SimulatorOptions): Promise<Simulator> {
  const logger = options.logger ?? silentLogger;
  const app = Fastify({
    // fastify types its logger generically; pino's Logger satisfies the base interface.
    loggerInstance: logger as FastifyBaseLogger,
    // Quiet about every request: under load the simulator would drown its own log.
    logController: new LogController({ disableRequestLogging: true }),
    // Clients keep sockets alive between requests; close() must still end promptly.
    forceCloseConnections: true,
    keepAliveTimeout: 65_000,
    return503OnClosing: false,
  });
  const host = options.host ?? '127.0.0.1';
  const sim = new SimulatorServer(app, host, options);
  app.setNotFoundHandler((req, reply) =>
    reply.code(404).send({ error: `No route for ${req.method} ${req.url.split('?')[0] ?? ''}` }),
  );
  app.setErrorHandler((err: { statusCode?: number; message?: string }, _req, reply) => {
    const status = typeof err.statusCode === 'number' && err.statusCode >= 400 ? err.statusCode : 500;
    if (status >= 500) logger.error({ err }, 'simulator handler failed');
    return reply.code(status).send({ error: err.message ?? 'Internal server error' });
  });
  sim.installCounters();
  sim.installRoutes();
  await app.listen({ port: options.port ?? EPHEMERAL_PORT, host });
  const address = app.server.address();
  sim.port = typeof address === 'object' && address !== null ? address.port : 0;
  logger.info({ origin: sim.origin, workspaces: options.workspaces.map((w) => w.name) }, 'simulator listening');
  return sim;
}

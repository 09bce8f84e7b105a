import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { Secret } from '../../src/config/index.js';
import {
  CrmClient,
  LIST_RESOURCES,
  OPERATIONS,
  OPERATION_FIELDS,
  OPERATION_TABLE,
  OperationPayloadSchema,
  RECONCILE_OPERATIONS,
  RESOURCE_TABLE,
  RUN_OPERATIONS,
  TeamMembersBodySchema,
  defaultMatchKey,
  operationEntry,
  operationPath,
  responseSchemaOf,
  sendsAs,
  type Operation,
  type OperationPayload,
} from '../../src/crm/index.js';
import { operationWords } from '../../src/dashboard/status-words.js';
import { RowDecoder } from '../../src/ingest/index.js';
import { startSimulator, type Simulator } from '../../src/sim/index.js';
import { client as simClient } from '../sim/sim-fixture.js';

/**
 * Walks the operation table: every operation has a body schema, the row decoder turns a sample
 * row into its payload, and the request the table describes (method, path, wrapper) is one the
 * simulator serves and applies. The simulator reads the bodies its own way (src/sim), so a table
 * entry that disagrees with the API model fails here.
 */

/** One source row per operation, as a CSV gives it (text cells); an update's `id` is filled in. */
const SAMPLES: Record<Operation, Record<string, string>> = {
  'deal.update': { name: 'Table walk deal', value: '12.5', status: 'won' },
  'deal.create': { name: 'Table walk new deal', value: '3' },
  'lead.update': { name: 'Table walk lead' },
  'contact.update': { name: 'Table walk contact', phone_number: '+1 555 0100' },
  'team.invite': { email: 'table.walk@example.com', send_invitation_email: 'no' },
};

const KEY = 'k-table-walk';
let sim: Simulator;
const clients: CrmClient[] = [];

beforeAll(async () => {
  sim = await startSimulator({
    port: 0,
    workspaces: [{ name: 'acme', apiKeys: [KEY], records: 20, seed: 3, rateLimit: null }],
  });
});

afterAll(async () => {
  for (const c of clients) c.close();
  await sim?.close();
});

type SimResource = (typeof LIST_RESOURCES)[number];

function records(resource: SimResource): Map<string, object> {
  return sim.workspace('acme')[resource] as unknown as Map<string, object>;
}

/** The id of a seeded record of the resource an update writes. */
function someId(resource: SimResource): string {
  const [id] = records(resource).keys();
  if (id === undefined) throw new Error(`the simulator has no ${resource}`);
  return id;
}

function decode(op: Operation): OperationPayload {
  const entry = OPERATION_TABLE[op];
  const values: Record<string, string> = { ...SAMPLES[op] };
  if (entry.shape === 'update') values.id = someId(entry.resource as SimResource);
  const decoded = new RowDecoder({ op }).decodeValues(values);
  expect(decoded.errors).toBeUndefined();
  return decoded.payload!;
}

/** The request body the table describes for a payload; an invite's rows batch as `{emails, ...options}`. */
function bodyOf(payload: OperationPayload): unknown {
  if (payload.op === 'team.invite') return TeamMembersBodySchema.parse({ emails: [payload.email], ...payload.options });
  const { wrapper } = OPERATION_TABLE[payload.op];
  return { [wrapper]: payload.fields };
}

describe('the operation table', () => {
  it.each(OPERATIONS)('%s: a body schema, a decoded sample row, a request the simulator serves', async (op) => {
    const entry = OPERATION_TABLE[op];
    expect(OPERATION_FIELDS[op]).toBeInstanceOf(z.ZodObject);

    const payload = decode(op);
    expect(payload.op).toBe(op);
    expect(OperationPayloadSchema.parse(payload)).toEqual(payload);

    const id = 'id' in payload ? payload.id : undefined;
    const answer = await simClient(sim, 'acme', KEY).call(entry.method, operationPath(op, id), bodyOf(payload));
    const ok: readonly number[] = 'okStatuses' in entry ? entry.okStatuses : [200, 204];
    expect({ status: answer.status, body: answer.json }).toMatchObject({ status: expect.toBeOneOf([...ok]) });

    if (payload.op === 'team.invite') {
      expect(sim.workspace('acme').teamMembers.has(payload.email)).toBe(true);
      return;
    }
    // The answer is the written record, and the simulator holds what was sent.
    const written = responseSchemaOf(payload.op).parse(answer.json) as { id: string };
    if (id !== undefined) expect(written.id).toBe(id);
    const record = records(entry.resource as SimResource).get(written.id) as Record<string, unknown> | undefined;
    expect(record).toBeDefined();
    for (const [field, value] of Object.entries(payload.fields)) {
      if (typeof value === 'string' && field in record!) expect(record![field]).toBe(value);
    }
  });

  it('the client sends every update operation as the table describes it', async () => {
    const c = new CrmClient({ workspace: 'acme', baseUrl: sim.baseUrl('acme'), apiKey: new Secret(KEY) });
    clients.push(c);
    const updates = OPERATIONS.filter((op) => OPERATION_TABLE[op].shape === 'update');
    expect(updates.length).toBeGreaterThan(0);
    for (const op of updates) {
      const payload = decode(op);
      if (!('id' in payload)) throw new Error(`${op} decoded without an id`);
      await expect(c.update(payload)).resolves.toBe(payload.id);
    }
  });

  it('a path the simulator does not serve is told apart from a record it lacks', async () => {
    const api = simClient(sim, 'acme', KEY);
    const unserved = await api.call('PATCH', 'v2/widgets/1', { widget: { name: 'x' } });
    expect(unserved.status).toBe(404);
    expect(unserved.text).toContain('No route');
    for (const op of OPERATIONS.filter((o) => operationPath(o, 'x').includes('/x'))) {
      const missing = await api.call(
        OPERATION_TABLE[op].method,
        operationPath(op, 'no-such-record'),
        bodyOf(decode(op)),
      );
      expect(missing.status).toBe(404);
      expect(missing.text).not.toContain('No route');
    }
  });

  it('every run operation has words, sends as an operation of the table, and reconciles a list it can match', () => {
    for (const op of RUN_OPERATIONS) {
      expect(operationWords(op)).not.toBe(op);
      expect(OPERATIONS).toContain(sendsAs(op));
      expect(operationEntry(op).updateRequired).toEqual(OPERATION_TABLE[sendsAs(op)].updateRequired);
    }
    for (const op of RECONCILE_OPERATIONS) {
      const { resource } = operationEntry(op);
      expect(LIST_RESOURCES).toContain(resource);
      const keys: readonly string[] = RESOURCE_TABLE[resource as SimResource].matchKeys;
      expect(keys).toContain(defaultMatchKey(op));
    }
  });
});

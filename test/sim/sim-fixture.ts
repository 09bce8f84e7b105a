import { z } from 'zod';
import type { Agent } from 'node:http';
import type { Simulator } from '../../src/sim/index.js';
import { httpRequest, type HttpAnswer } from '../helpers/http.js';

/** Requests to one workspace of a running simulator, with its key unless told otherwise. */
export function client(sim: Simulator, workspace: string, apiKey: string | null, agent?: Agent) {
  const call = (
    method: string,
    path: string,
    body?: unknown,
    headers: Record<string, string> = {},
  ): Promise<HttpAnswer> =>
    httpRequest({
      port: sim.port,
      method,
      path: `/api/external/${path}`,
      host: `${workspace}.localhost:${sim.port}`,
      headers: { accept: 'application/json', ...(apiKey === null ? {} : { 'x-api-key': apiKey }), ...headers },
      body,
      ...(agent ? { agent } : {}),
    });
  return {
    get: (path: string, headers?: Record<string, string>) => call('GET', path, undefined, headers),
    post: (path: string, body: unknown, headers?: Record<string, string>) => call('POST', path, body, headers),
    patch: (path: string, body: unknown, headers?: Record<string, string>) => call('PATCH', path, body, headers),
    call,
  };
}

/** Every 4xx/5xx body is exactly `{error: string}`. */
export const ErrorBody = z.strictObject({ error: z.string().min(1) });

export function errorOf(answer: HttpAnswer): string {
  return ErrorBody.parse(answer.json).error;
}

// Spec §2 shapes, written from the spec text (not from the simulator's code).
const isoDateTime = z.iso.datetime({ offset: true });
const Ref = z.strictObject({ id: z.string(), name: z.string() });
export const SpecTag = z.strictObject({ id: z.string(), name: z.string(), style: z.string() });

export const SpecDeal = z.strictObject({
  id: z.string(),
  name: z.string(),
  status: z.enum(['in_progress', 'won', 'lost']),
  value: z.number(),
  currency: z.string(),
  price: z.string(),
  unique_number: z.string(),
  contact: Ref.nullable(),
  company: Ref.nullable(),
  owner: z.string().nullable(),
  pipeline: Ref.nullable(),
  stage: Ref.nullable(),
  tags: z.array(SpecTag),
  created_at: isoDateTime,
  updated_at: isoDateTime,
});

export const SpecLead = z.strictObject({
  id: z.string(),
  name: z.string(),
  status: z.enum(['open', 'converted', 'archived']),
  unique_number: z.string(),
  email: z.string(),
  phone_number: z.string(),
  contact: z.strictObject({ id: z.string().nullable(), name: z.string() }),
  company: z.strictObject({ id: z.string().nullable(), name: z.string().nullable() }),
  owner: z.string().nullable(),
  tags: z.array(SpecTag),
  created_at: isoDateTime,
  updated_at: isoDateTime,
});

export const SpecContact = z.strictObject({
  id: z.string(),
  name: z.string(),
  email: z.string(),
  phone_number: z.string(),
  created_at: isoDateTime,
  updated_at: isoDateTime,
  owner: z.string().nullable(),
  tags: z.array(SpecTag),
  company: z.strictObject({ id: z.string().nullable(), name: z.string().nullable() }),
});

export const Pagination = z.strictObject({
  total_records: z.int().min(0),
  current_page_number: z.int().min(1),
  total_pages: z.int().min(0),
  page_size: z.int().min(1),
});

export function listPage<T extends z.ZodType>(plural: string, item: T) {
  return z.strictObject({ [plural]: z.array(item), pagination: Pagination });
}

import { expect } from 'vitest';
import { csv, startHarness, type Harness } from '../helpers/pipeline.js';
import { cliFor } from '../helpers/run-cli.js';

/*
 * What the change-control CLI files share (change-control-cli.test.ts, change-control-refusals.test.ts,
 * split so that vitest runs them side by side): a workspace that requires approval, 300 contacts.
 */

export interface PlanJson {
  planId: string;
  counts: Record<string, number>;
}
export interface RunJson {
  id: string;
  status: string;
  counts: Record<string, number>;
  options: { plan?: string };
}

/** The simulator with 300 contacts, and a workspace that requires approval. */
export function startChangeControlHarness(): Promise<Harness> {
  return startHarness({ records: 300, workspace: { requireApproval: true } });
}

/** A plan of `n` renames (by id) of the contacts from `from` on; the new names by contact id. */
export async function planRenames(h: Harness, from: number, n: number, tag: string) {
  const contacts = [...h.ws.contacts.values()].slice(from, from + n);
  const names = new Map(contacts.map((c, i) => [c.id, `${tag} ${i}`]));
  const file = h.file(
    `${tag}.csv`,
    csv(
      ['id', 'name'],
      contacts.map((c) => [c.id, names.get(c.id)!]),
    ),
  );
  const made = await cliFor(() => h)(['plan', file, '--op', 'contact.update', '-w', 'acme', '--json']);
  expect(made.code, made.stderr).toBe(0);
  return { plan: JSON.parse(made.stdout) as PlanJson, contacts, names };
}

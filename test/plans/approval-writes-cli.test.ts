import { readFileSync, writeFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { csv, startHarness, type Harness } from '../helpers/pipeline.js';
import { cliFor } from '../helpers/run-cli.js';
import type { PlanJson, RunJson } from './change-control-fixture.js';

/*
 * A workspace with "requireApproval": true writes only what a person approved (issue 41, item 8),
 * through the CLI as a user runs it, against the simulator over HTTP (a CRM fault proxy makes an
 * applied plan's writes fail, so that its run has rows to retry): `runs retry --file` with edited
 * values, a plain `import` and `import --reconcile` write nothing and exit 2 naming the plan that
 * does it; that advice, followed, writes exactly the file once approved; a retry without a file
 * sends the plan's approved values; a dry run is not refused.
 */

let h: Harness;
beforeAll(async () => {
  h = await startHarness({
    records: 60,
    workspace: { requireApproval: true },
    crmProxy: true,
    retry: { attempts: 1, backoffMs: 10 },
  });
  await h.startWorkers();
});
afterAll(async () => h?.close());

const cli = cliFor(() => h);
const updates = () => h.ws.stats.writes.contactUpdate;

/** The `crm-sync plan …` command a refusal names, as arguments. */
function advisedPlan(message: string): string[] {
  const found = /crm-sync (plan [^;]+);/.exec(message);
  expect(found, message).not.toBeNull();
  return found![1]!.trim().split(/\s+/);
}

describe('requireApproval: nothing is written that nobody approved', () => {
  it('runs retry --file with edited values in an approved plan run writes none of them (exit 2); without a file, the approved values go', async () => {
    const contacts = [...h.ws.contacts.values()].slice(0, 5);
    const file = h.file(
      'approved.csv',
      csv(
        ['id', 'name'],
        contacts.map((c, i) => [c.id, `Approved ${i}`]),
      ),
    );
    const made = await cli(['plan', file, '--op', 'contact.update', '-w', 'acme', '--json']);
    expect(made.code, made.stderr).toBe(0);
    const plan = JSON.parse(made.stdout) as PlanJson;
    expect((await cli(['plans', 'approve', plan.planId])).code).toBe(0);
    // The CRM fails the five writes (502, one attempt): the run ends with five failed rows.
    h.proxy!.setRules([{ method: 'PATCH', fail502: true, times: 5 }]);
    const applied = await cli(['apply', plan.planId, '--wait', '--json'], { timeoutMs: 90_000 });
    const run = JSON.parse(applied.stdout) as RunJson;
    expect(run.counts).toMatchObject({ total: 5, failed: 5 });
    h.proxy!.setRules([]);

    // The operator exports the failed rows and edits every name in the spreadsheet.
    const exported = h.file('failed.csv', '');
    expect((await cli(['runs', 'export', run.id, '--failed', '--out', exported])).code).toBe(0);
    writeFileSync(exported, readFileSync(exported, 'utf8').replaceAll('Approved ', 'Edited '));
    const before = updates();
    const retried = await cli(['runs', 'retry', run.id, '--file', exported, '--wait'], { timeoutMs: 90_000 });
    expect(retried.code, retried.stderr).toBe(2);
    expect(retried.stderr).toContain('[APPROVAL_REQUIRED]');
    expect(retried.stderr).toContain('requires approval');
    expect(retried.stderr).toContain(`crm-sync plan <source file> --op contact.update -w acme`);
    expect(updates()).toBe(before);
    for (const c of contacts) expect(h.ws.contacts.get(c.id)!.name).toBe(c.name);
    const shown = JSON.parse((await cli(['runs', 'show', run.id, '--json'])).stdout) as { run: RunJson };
    expect(shown.run.counts).toMatchObject({ failed: 5, succeeded: 0 });

    // Without a file the retry sends the rows' stored values: the plan's, as approved.
    const again = await cli(['runs', 'retry', run.id, '--wait'], { timeoutMs: 90_000 });
    expect(again.code, again.stderr).toBe(0);
    expect(updates()).toBe(before + 5);
    for (const [i, c] of contacts.entries()) expect(h.ws.contacts.get(c.id)!.name).toBe(`Approved ${i}`);
  }, 240_000);

  it('a plain import and import --reconcile write nothing (exit 2, --json too); the plan they name writes the file once approved', async () => {
    const contacts = [...h.ws.contacts.values()].slice(10, 20);
    const file = h.file(
      'import.csv',
      csv(
        ['id', 'email', 'name'],
        contacts.map((c, i) => [c.id, c.email, `Imported ${i}`]),
      ),
    );
    const before = updates();
    const plain = await cli(['import', file, '--op', 'contact.update', '-w', 'acme', '--wait']);
    expect(plain.code, plain.stderr).toBe(2);
    expect(plain.stderr).toContain('[APPROVAL_REQUIRED]');
    expect(plain.stderr).toContain('nothing was read or sent');
    const reconciled = await cli([
      'import',
      file,
      '--op',
      'contact.update',
      '-w',
      'acme',
      '--reconcile',
      '--match',
      'email',
      '--wait',
      '--json',
    ]);
    expect(reconciled.code, reconciled.stderr).toBe(2);
    const answer = JSON.parse(reconciled.stdout) as { error: { code: string; message: string } };
    expect(answer.error.code).toBe('APPROVAL_REQUIRED');
    expect(updates()).toBe(before);
    for (const c of contacts) expect(h.ws.contacts.get(c.id)!.name).toBe(c.name);
    // A dry run sends nothing, so it is not refused.
    const dry = await cli(['import', file, '--op', 'contact.update', '-w', 'acme', '--dry-run']);
    expect(dry.code, dry.stderr).toBe(0);
    expect(updates()).toBe(before);

    // The advice, followed to the letter: plan, approve, apply.
    const args = advisedPlan(answer.error.message);
    expect(args.join(' ')).toBe(`plan ${file} --match email --op contact.update -w acme`);
    const made = await cli([...args, '--json']);
    expect(made.code, made.stderr).toBe(0);
    const plan = JSON.parse(made.stdout) as PlanJson;
    expect(plan.counts).toMatchObject({ update: 10 });
    expect(updates()).toBe(before);
    expect((await cli(['plans', 'approve', plan.planId])).code).toBe(0);
    const applied = await cli(['apply', plan.planId, '--wait'], { timeoutMs: 90_000 });
    expect(applied.code, applied.stderr).toBe(0);
    expect(updates()).toBe(before + 10);
    for (const [i, c] of contacts.entries()) expect(h.ws.contacts.get(c.id)!.name).toBe(`Imported ${i}`);
  }, 240_000);
});

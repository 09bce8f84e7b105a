import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHarness, type Harness, type HarnessOptions } from '../helpers/pipeline.js';
import { cliFor } from '../helpers/run-cli.js';
import { writes } from './fixtures.js';

/**
 * The end-to-end reconcile, import, verify and nightly-sync commands as child processes; run on
 * one Redis (cli.test.ts) and on a Redis Cluster (test/cluster). `options` is read when the
 * suite starts (a cluster's nodes are known only then).
 */
export function reconcileCliSuite(title: string, options: () => HarnessOptions = () => ({})): void {
  describe(title, () => {
    let h: Harness;
    // The shipped samples and jobs/ are made from the simulator's seed 7 with 200 records.
    beforeAll(async () => {
      h = await startHarness({ records: 200, seed: 7, ...options() });
    });
    afterAll(async () => h?.close());

    const cli = cliFor(() => h);
    const contactArgs = [
      '--op',
      'contact.update',
      '-w',
      'acme',
      '--mapping',
      'samples/contacts-sync-mapping.json',
      '--match',
      'email',
      '--key-column',
      'Email',
    ];

    it('plans without sending, runs the reconciled import, and verifies it', async () => {
      const planned = await cli(['reconcile', 'samples/contacts-sync.csv', ...contactArgs, '--out', '-']);
      expect(planned.stderr).toContain(
        'plan for 41 rows: update 24, create 0, skip 16, not-found 1, ambiguous 0, invalid 0',
      );
      expect(planned.stdout.trim().split('\n')).toHaveLength(42);
      expect(planned.code).toBe(1);
      expect(writes(h)).toBe(0);

      const imported = await cli([
        'import',
        'samples/contacts-sync.csv',
        ...contactArgs,
        '--reconcile',
        '--work',
        '--json',
      ]);
      const run = JSON.parse(imported.stdout) as {
        id: string;
        counts: Record<string, number>;
        options: Record<string, unknown>;
      };
      expect(run.counts).toMatchObject({ total: 41, succeeded: 24, skipped: 16, failed: 1 });
      expect(run.options).toMatchObject({ reconcile: true, matchKey: 'email' });
      expect(h.ws.stats.writes.contactUpdate).toBe(24);

      const clean = await cli(['verify', run.id]);
      expect(clean.stdout).toContain('24 rows checked, 24 match, 0 drifted');
      expect(clean.code).toBe(0);
      const first = [...h.ws.contacts.values()][1]!;
      h.ws.updateRecord('contacts', first.id, { phone_number: '+1 000-000-0000' });
      const drift = await cli(['verify', run.id, '--out', '-']);
      expect(drift.stderr).toContain('1 drifted (phone_number 1)');
      expect(drift.stdout).toContain(`2,3,${first.id},phone_number,'+1 415-555-1001,'+1 000-000-0000`);
      expect(drift.code).toBe(1);
    }, 60_000);

    it('installs the shipped jobs/ definitions and runs the deal upsert sync twice: the second sends nothing', async () => {
      const synced = await cli(['schedule', 'sync']);
      expect(synced.stdout).toContain('installed: nightly-contacts, nightly-deals');
      const listed = await cli(['schedule', 'list']);
      expect(listed.stdout).toMatch(
        /nightly-deals {2}deal\.upsert -> acme {2}"30 2 \* \* \*" Europe\/Berlin {2}installed, next 20\d\d-/,
      );

      const before = h.ws.deals.size;
      const first = await cli(['schedule', 'run', 'nightly-deals', '--work', '--json']);
      expect(JSON.parse(first.stdout)).toMatchObject({
        status: 'completed',
        plan: { create: 10, invalid: 1 },
        counts: { succeeded: 10, invalid: 1 },
      });
      expect(h.ws.deals.size).toBe(before + 10);
      h.ws.resetStats();
      const second = await cli(['schedule', 'run', 'nightly-deals', '--work', '--json']);
      expect(JSON.parse(second.stdout)).toMatchObject({
        plan: { create: 0, skip: 10, invalid: 1 },
        counts: { skipped: 10 },
      });
      expect(writes(h)).toBe(0);

      const history = await cli(['runs', 'list', '--sync', 'nightly-deals', '--json']);
      expect((JSON.parse(history.stdout) as { total: number }).total).toBe(2);
      expect((await cli(['schedule', 'remove', 'nightly-deals'])).stdout).toContain('removed nightly-deals');
    }, 60_000);

    it('schedule run exits 3 (blocked) when the CRM refuses the key, and says to fix it and run the sync again', async () => {
      h.ws.revokeApiKey(h.apiKey);
      try {
        const res = await cli(['schedule', 'run', 'nightly-contacts']);
        expect(res.stdout).toMatch(
          /^sync nightly-contacts: run \S+ blocked \(The CRM refused the API key of workspace "acme" \(HTTP 401.*run the sync again/,
        );
        expect(res.code).toBe(3);
      } finally {
        h.ws.addApiKey(h.apiKey);
      }
    }, 60_000);
  });
}

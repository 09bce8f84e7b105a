import { describe, expect, it } from 'vitest';
import { csv } from '../helpers/pipeline.js';
import { runCli } from '../helpers/run-cli.js';
import { SCALE, chaosFixture, checkChaos, killLoop, spawnWorker } from './chaos-check.js';

const chaos = chaosFixture();
const children = chaos.children;

describe('chaos: faults in the middle of a run', () => {
  it(
    'the key revoked at the CRM mid-run: the run blocks without burning rows; fixed and resumed, it completes',
    async () => {
      const n = 400 * SCALE;
      const h = await chaos.start({ records: n, latencyMs: 40 });
      const ids = [...h.ws.deals.values()].map((d) => d.id);
      const file = h.file(
        'updates.csv',
        csv(
          ['id', 'name'],
          ids.map((id, i) => [id, `Revoked ${i}`]),
        ),
      );
      spawnWorker(h, children);
      spawnWorker(h, children);
      const run = await h.importFile(file, 'deal.update');
      await h.waitForRun(run.id, 60_000, (r) => r.counts.succeeded >= n / 8);
      h.ws.revokeApiKey(h.apiKey);
      const blocked = await h.waitForRun(run.id, 30_000, (r) => r.status === 'blocked');
      expect(blocked.counts.failed).toBe(0);
      expect(blocked.counts.succeeded).toBeLessThan(n); // it really blocked mid-run
      expect(blocked.reason).not.toContain(h.apiKey);

      h.ws.addApiKey(h.apiKey);
      const resumed = await runCli(['--config', h.configPath, 'runs', 'resume', run.id], h.env);
      expect(resumed.code).toBe(0);
      const done = await h.waitForRun(run.id, 90_000 * SCALE);
      const results = await checkChaos(h, done, {
        scenario: '401 mid-run, key fixed, runs resume',
        rowsIn: n,
        applied: h.ws.stats.writes.dealUpdate,
      });
      console.log(
        `[chaos] 401 mid-run: blocked at ${blocked.counts.succeeded} succeeded; 401s answered ${h.ws.stats.byStatus[401] ?? 0}`,
      );
      expect(results.every((r) => r.status === 'succeeded')).toBe(true);
      for (const [i, id] of ids.entries()) expect(h.ws.deals.get(id)?.name).toBe(`Revoked ${i}`);
    },
    180_000 * SCALE,
  );

  it(
    'invites under the fault mix and a kill loop: every address a member, one result per row',
    async () => {
      const n = 300 * SCALE;
      const h = await chaos.start({ records: 5, latencyMs: 60, retry: { attempts: 12, backoffMs: 50 } });
      const membersBefore = h.ws.teamMembers.size;
      const emails = Array.from({ length: n }, (_, i) => `chaos.${i + 1}@invites.example`);
      const file = h.file(
        'invites.csv',
        csv(
          ['email', 'organization_role'],
          emails.map((e) => [e, 'Standard']),
        ),
      );
      h.ws.setFaults({ errorRate: 0.1, resetRate: 0.05, commitThenDropRate: 0.1 });
      const run = await h.importFile(file, 'team.invite', { inviteBatchSize: 5 });
      const kills = await killLoop(h, children, run.id, { count: 2, forMs: 8000 * SCALE, minMs: 1500, maxMs: 3000 });
      const done = await h.waitForRun(run.id, 120_000 * SCALE);
      h.ws.setFaults(null);
      const { errors5xx, resets, drops } = h.ws.stats;
      console.log(
        `[chaos] invites: ${kills} kills while the run went on; team-member requests applied ${h.ws.stats.writes.teamMembers}; faults ${JSON.stringify({ errors5xx, resets, drops })}`,
      );
      const results = await checkChaos(h, done, {
        scenario: 'invites, fault mix + kill loop',
        rowsIn: n,
        applied: h.ws.stats.writes.membersAdded,
      });
      expect(errors5xx + resets + drops).toBeGreaterThan(0); // the faults really fired
      expect(results.filter((r) => r.status !== 'succeeded')).toEqual([]);
      for (const e of emails) expect(h.ws.teamMembers.has(e)).toBe(true);
      expect(h.ws.teamMembers.size).toBe(membersBefore + n);
      expect(h.ws.stats.writes.membersAdded).toBe(n); // an invite applied then dropped and sent again adds no one twice
    },
    240_000 * SCALE,
  );
});

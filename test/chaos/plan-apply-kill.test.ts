import { describe, expect, it } from 'vitest';
import { csv } from '../helpers/pipeline.js';
import { runCli } from '../helpers/run-cli.js';
import { SCALE, chaosFixture, checkChaos, killLoop } from './chaos-check.js';

const chaos = chaosFixture();
const children = chaos.children;

describe('chaos: applying a plan while workers are killed (issue 33)', () => {
  it(
    'kill -9 of workers during apply: one result per row, no record a person edited since the plan is written',
    async () => {
      const n = 300 * SCALE;
      const h = await chaos.start({ records: n + 50, latencyMs: 40 });
      const contacts = [...h.ws.contacts.values()].slice(0, n);
      const file = h.file(
        'renames.csv',
        csv(
          ['id', 'name'],
          contacts.map((c, i) => [c.id, `Planned ${i}`]),
        ),
      );
      const cli = (args: string[]) => runCli(['--config', h.configPath, '--log-level', 'warn', ...args], h.env);
      const made = await cli(['plan', file, '--op', 'contact.update', '-w', 'acme', '--json']);
      expect(made.code, made.stderr).toBe(0);
      const { planId } = JSON.parse(made.stdout) as { planId: string };
      // A person edits every tenth record between plan and apply.
      const edited = new Set(contacts.filter((_, i) => i % 10 === 7).map((c) => c.id));
      for (const id of edited) h.ws.updateRecord('contacts', id, { name: `Person ${id}` });

      const applied = await cli(['apply', planId, '--json']);
      expect(applied.code, applied.stderr).toBe(0);
      const { id: runId } = JSON.parse(applied.stdout) as { id: string };
      const kills = await killLoop(h, children, runId, { count: 2, forMs: 8000 * SCALE, minMs: 800, maxMs: 1600 });
      const done = await h.waitForRun(runId, 120_000 * SCALE);
      const results = await checkChaos(h, done, {
        scenario: `apply of a plan, ${kills} kills`,
        rowsIn: n,
        applied: h.ws.stats.writes.contactUpdate,
      });
      expect(done.counts).toMatchObject({ succeeded: n - edited.size, drifted: edited.size, failed: 0 });
      for (const [i, c] of contacts.entries()) {
        const name = h.ws.contacts.get(c.id)!.name;
        expect(name).toBe(edited.has(c.id) ? `Person ${c.id}` : `Planned ${i}`);
      }
      expect(
        results
          .filter((r) => r.status === 'drifted')
          .map((r) => r.recordId)
          .sort(),
      ).toEqual([...edited].sort());
    },
    180_000 * SCALE,
  );
});

import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { csv, startHarness, type Harness } from '../helpers/pipeline.js';
import { harnessArgs, startCli } from '../helpers/run-cli.js';

/*
 * An import of creates interrupted mid-file: the failed run's reason must not advise importing
 * the file again (every deal that went would be made twice), but going on with runs resume.
 */
describe('an import interrupted while reading its file', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ records: 5 });
  });
  afterAll(async () => {
    await h?.close();
  });

  it('names runs resume for a file of creates, never a plain re-import', async () => {
    const file = h.file(
      'creates.csv',
      csv(
        ['name', 'value'],
        Array.from({ length: 1500 }, (_, i) => [`Interrupted ${i + 1}`, i]),
      ),
    );
    // No workers and a high-water mark of 20: after its first chunk the import waits, mid-file.
    const cli = startCli(
      harnessArgs(h, ['import', file, '--op', 'deal.create', '-w', 'acme', '--high-water', '20']).args,
      { ...h.env, CI: 'true' },
    );
    try {
      let runId: string | undefined;
      for (let i = 0; i < 400 && !runId; i++) {
        runId = (await h.runtime.store.listRuns({ workspace: 'acme' })).runs[0]?.id;
        if (!runId) await sleep(50);
      }
      expect(runId).toBeDefined();
      await h.waitForRun(runId!, 20_000, (r) => r.counts.queued >= 20);
      cli.child.kill('SIGINT');
      const code = await cli.exited;
      const run = await h.runtime.store.requireRun(runId!);
      expect(code).toBe(130);
      expect(run.status).toBe('failed');
      expect(run.reason).toBe(
        `interrupted (SIGINT) while reading the file; rows not read were not sent: go on from there with: crm-sync runs resume ${runId}`,
      );
    } finally {
      if (cli.child.exitCode === null) cli.child.kill('SIGKILL');
    }
  }, 60_000);
});

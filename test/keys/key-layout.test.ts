import { readFileSync } from 'node:fs';
import clusterKeySlot from 'cluster-key-slot';
import { describe, expect, it } from 'vitest';
import * as keys from '../../src/keys/index.js';
import { queueName, workspaceOfQueue } from '../../src/queue/index.js';

const P = 'pfx';
const layoutText = readFileSync(new URL('../../src/keys/key-layout.ts', import.meta.url), 'utf8');

/** Every key family with sample arguments, and the pattern the layout comment gives for it. */
function families(ws: string, run: string): Array<[pattern: string, key: string]> {
  const rk = new keys.RunKeys(P);
  const r = { id: run, workspace: ws };
  return [
    ['<p>:run:{<w>}:<id>', rk.run(r)],
    ['<p>:run:{<w>}:<id>:results:<b>', rk.resultBucket(r, 3)],
    ['<p>:run:{<w>}:<id>:problems', rk.problems(r)],
    ['<p>:run:{<w>}:<id>:rounds', rk.rounds(r)],
    ['<p>:run:{<w>}:<id>:creating', rk.creating(r)],
    ['<p>:ws:{<w>}:order:<res>:<id>', rk.recordOrder(ws, 'deals', 'd1')],
    ['<p>:ws:{<w>}:create:<fp>', rk.createLock(ws, 'f1')],
    ['<p>:ws:{<w>}:claim:<dealId>', rk.dealClaim(ws, 'd1')],
    ['<p>:ws:{<w>}:upserted:<hash>', rk.upserted(ws, 'h1')],
    ['<p>:ws:{<w>}:lookup', rk.lookupBoard(ws)],
    ['<p>:ws:{<w>}:lookup:snap', rk.lookupSnapshot(ws)],
    ['<p>:ws:{<w>}:before:<res>', rk.beforeBoard(ws, 'deals')],
    ['<p>:ws:{<w>}:before:<res>:snap', rk.beforeSnapshot(ws, 'deals')],
    ['<p>:ws:{<w>}:before-run:<id>', rk.beforeRunStart(ws, run)],
    ['<p>:ws:{<w>}:holds', rk.workspaceHolds(ws)],
    ['<p>:ws:{<w>}:runs', rk.byWorkspace(ws)],
    ['<p>:ws:{<w>}:runs:status:<s>', rk.byStatus(ws, 'running')],
    ['<p>:runs', rk.allRuns()],
    ['<p>:runs:workspace', rk.runWorkspaces()],
    ['<p>:runs:workspaces', rk.workspacesWithRuns()],
    ['<p>:sync:<name>:runs', rk.bySync(ws)],
    ['<p>:layout', keys.layoutKey(P)],
    ['<p>:layout:migrating', keys.layoutLockKey(P)],
    ['<p>:q:{<w>}:…', `${keys.bullPrefix(P)}:${queueName(ws)}:wait`],
    ['<p>:ws:{<w>}:bucket', keys.requestBudgetKey(P, ws)],
    ['<p>:work', keys.workBoardKey(P)],
    ['<p>:pools', keys.poolsKey(P)],
    ['<p>:generation', keys.generationKey(P)],
    ['<p>:probe:<w>', keys.probeKey(P, ws)],
    ['<p>:scheduler:probe', keys.schedulerProbeKey(P)],
    ['<p>:housekeeping:lock', keys.housekeepingLockKey(P)],
    ['<p>:sync:<name>:lock', keys.syncLockKey(P, ws)],
    ['<p>:metrics', keys.metricsKey(P)],
    ['<p>:metrics:series:{<w>}:<b>', keys.seriesKey(P, ws, 7)],
    ['<p>:metrics:run:<id>', keys.runSeriesKey(P, run)],
    ['<p>:dashboard:session:<token fingerprint>:<sha256 of the session id>', keys.sessionKey(P, 'fp', 'h')],
    ['<p>:dashboard:auth-failures:<client>', `${keys.authFailuresNamespace(P)}127.0.0.1`],
    ['<p>:dashboard:upload:<token>', keys.uploadAnswerKey(P, 't1')],
  ];
}

describe('the Redis key layout (src/keys)', () => {
  it('documents every key family it makes, in the one layout comment', () => {
    for (const [pattern] of families('acme', 'r1')) expect(layoutText, pattern).toContain(pattern);
  });

  it('keeps every key under the prefix, and families apart even for workspaces named like other families', () => {
    // Workspace names are letters, digits, - and _: these are all allowed.
    for (const ws of ['acme', 'run', 'runs', 'q', 'work', 'pools', 'metrics', 'ws', 'sync', 'dashboard', 'lock']) {
      const all = families(ws, '20261125-120000-000-000abcde');
      for (const [pattern, key] of all) expect(key.startsWith(`${P}:`), `${pattern} → ${key}`).toBe(true);
      const seen = new Map<string, string>();
      for (const [pattern, key] of all) {
        expect(seen.get(key), `${pattern} and ${seen.get(key)} both make ${key}`).toBeUndefined();
        seen.set(key, pattern);
      }
    }
  });

  it('gives every key of one workspace the same Cluster slot, and different workspaces different tags', () => {
    const perWorkspace = (ws: string) =>
      families(ws, '20261125-120000-000-000abcde').filter(([pattern]) => pattern.includes('{<w>}'));
    for (const ws of ['acme', 'a-b_c']) {
      const slots = new Set(perWorkspace(ws).map(([, key]) => clusterKeySlot(key)));
      expect(slots, ws).toEqual(new Set([clusterKeySlot(`{${ws}}`)]));
    }
    expect(clusterKeySlot(keys.requestBudgetKey(P, 'acme'))).not.toBe(clusterKeySlot(keys.requestBudgetKey(P, 'beta')));
  });

  it('maps a queue back to its workspace (the work board signals workspaces, producers hold queues)', () => {
    for (const ws of ['acme', 'a-b_c', 'W0999']) expect(workspaceOfQueue(queueName(ws))).toBe(ws);
  });
});

import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import type { WorkspaceQueue } from '../../src/queue/index.js';
import type { RowFence, RunStore } from '../../src/runs/index.js';
import { FailedJobSweep } from '../../src/worker/failed-job-sweep.js';
import { captureLogger } from '../helpers/log-capture.js';

/*
 * The close and the sweep under way (a review found "could not sweep failed jobs" logged after
 * "worker stopped" in 9 of 10 stops right after a start: the close pulled the connection from
 * under the first sweep). Unit-level: the queue is a stand-in whose getFailed answers when told
 * (the sweep's Redis work is covered by the crash-recovery and worker tests).
 */
function sweepWith(getFailed: () => Promise<never[]>) {
  const { logger, lines } = captureLogger();
  let asked = 0;
  const sweep = new FailedJobSweep({
    workspace: 'acme',
    queue: {
      getFailed: () => {
        asked++;
        return getFailed();
      },
    } as unknown as WorkspaceQueue,
    store: { failSilentProducers: async () => [] } as unknown as RunStore,
    fence: {} as RowFence,
    write: async () => undefined,
    logger,
    intervalMs: 20,
    producerSilenceMs: 60_000,
  });
  return { sweep, lines, asked: () => asked };
}

describe('FailedJobSweep', () => {
  it('stop() waits for the sweep under way; one cut short by the close is not a warning', async () => {
    let fail: (err: Error) => void = () => undefined;
    const { sweep, lines, asked } = sweepWith(() => new Promise<never[]>((_, reject) => (fail = reject)));
    sweep.start();
    await sleep(100);
    // Slow Redis: the interval fired several times, but one sweep at a time.
    expect(asked()).toBe(1);
    let stopped = false;
    const stopping = sweep.stop().then(() => (stopped = true));
    await sleep(20);
    expect(stopped).toBe(false);
    fail(new Error('Connection is closed.'));
    await stopping;
    expect(lines.filter((l) => l.level >= 40)).toEqual([]);
    expect(lines.some((l) => /cut short by the close/.test(l.msg))).toBe(true);
    await sleep(60);
    expect(asked()).toBe(1);
  });

  it('a sweep that fails while running is a warning, and the next one still comes', async () => {
    const { sweep, lines, asked } = sweepWith(async () => {
      throw new Error('READONLY');
    });
    sweep.start();
    await sleep(70);
    await sweep.stop();
    expect(asked()).toBeGreaterThan(1);
    expect(lines.filter((l) => l.msg === 'could not sweep failed jobs').length).toBeGreaterThan(0);
  });
});

import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { serveUntilSignal } from '../../src/cli/shutdown.js';

/*
 * A service command's life (worker, scheduler, dashboard): the handlers are there before the
 * start. The signal is emitted on `process` (its listeners run as for a real one); process.exit,
 * which the handler calls a second after the stop, and stderr are held so the test runner lives;
 * the handlers a test leaves are removed after it.
 */
describe('serveUntilSignal', () => {
  let exits: unknown[];
  let held: Map<'SIGINT' | 'SIGTERM', NodeJS.SignalsListener[]>;
  beforeEach(() => {
    exits = [];
    held = new Map((['SIGINT', 'SIGTERM'] as const).map((s) => [s, process.listeners(s)]));
    vi.spyOn(process, 'exit').mockImplementation(((code?: number) => {
      exits.push(code);
    }) as typeof process.exit);
    vi.spyOn(process.stderr, 'write').mockImplementation(() => true);
  });
  afterEach(() => {
    // A served handler stays for the process's last second (a second signal forces the exit);
    // here the next test must not meet it.
    for (const [signal, listeners] of held)
      for (const l of process.listeners(signal)) if (!listeners.includes(l)) process.off(signal, l);
    vi.restoreAllMocks();
  });

  /** The handler ends the process a second after its stop (held here): once, with `code`. */
  async function expectExit(code: number): Promise<void> {
    await sleep(1100);
    expect(exits).toEqual([code]);
  }

  it('a signal during a start that honours it: resolves not started, stop never called', async () => {
    const stop = vi.fn(async () => undefined);
    const served = serveUntilSignal({
      start: (signal) => sleep(60_000, 'never', { signal }),
      stop,
    });
    await sleep(20);
    process.emit('SIGTERM', 'SIGTERM');
    await expect(served).resolves.toEqual({ started: false });
    expect(stop).not.toHaveBeenCalled();
    await expectExit(0);
  });

  it('a signal during a start that finishes anyway: what it started is stopped', async () => {
    const stop = vi.fn(async (_value: string) => undefined);
    const served = serveUntilSignal({ start: () => sleep(100, 'pool'), stop });
    await sleep(20);
    process.emit('SIGINT', 'SIGINT');
    await expect(served).resolves.toEqual({ started: true });
    expect(stop).toHaveBeenCalledWith('pool');
    await expectExit(0);
  });

  it('a signal after the start stops it; a start that fails with no signal rejects and leaves no handler', async () => {
    const before = process.listenerCount('SIGTERM');
    const stop = vi.fn(async (_value: number) => undefined);
    const served = serveUntilSignal({ start: async () => 7, stop });
    await sleep(20);
    expect(process.listenerCount('SIGTERM')).toBe(before + 1);
    process.emit('SIGTERM', 'SIGTERM');
    await expect(served).resolves.toEqual({ started: true });
    expect(stop).toHaveBeenCalledWith(7);
    await expectExit(0);

    const before2 = process.listenerCount('SIGTERM');
    const failed = serveUntilSignal({
      start: () => Promise.reject(new Error('Redis refused')),
      stop: async () => undefined,
    });
    await expect(failed).rejects.toThrow('Redis refused');
    expect(process.listenerCount('SIGTERM')).toBe(before2);
  });

  it('a start that fails on its own after a signal rejects with its error, not hidden behind the stop', async () => {
    const stop = vi.fn(async () => undefined);
    const served = serveUntilSignal({
      // Ignores the signal, then fails as a port in use would.
      start: async () => {
        await sleep(100);
        throw new Error('port 4471 in use');
      },
      stop,
    });
    await sleep(20);
    process.emit('SIGTERM', 'SIGTERM');
    await expect(served).rejects.toThrow('port 4471 in use');
    expect(stop).not.toHaveBeenCalled();
    await expectExit(0);
  });
});

export interface ShutdownOptions {
  /**
   * After the first signal, the process exits by itself this long later (code 1) if `stop` has
   * not finished: whatever Redis does (blackholed, half-open), a SIGTERM ends the process.
   * Default: no deadline.
   */
  forceAfterMs?: number;
}

/**
 * Runs `stop` once on the first SIGINT/SIGTERM; a second signal exits at once (the operator
 * means it). Returns a function that removes the handlers.
 */
export function onShutdown(stop: (signal: NodeJS.Signals) => Promise<void>, options: ShutdownOptions = {}): () => void {
  let stopping = false;
  const handler = (signal: NodeJS.Signals) => {
    if (stopping) {
      process.stderr.write(`\n${signal} again: exiting now\n`);
      process.exit(130);
    }
    stopping = true;
    process.stderr.write(`\n${signal}: finishing in-flight requests, then stopping (again to force)\n`);
    if (options.forceAfterMs !== undefined) {
      const ms = options.forceAfterMs;
      // Unref'd: a stop that finishes lets the process end at once.
      setTimeout(() => {
        process.stderr.write(
          `did not stop within ${(ms / 1000).toFixed(0)} s (Redis unreachable?): exiting; unfinished rows are retried by other workers\n`,
        );
        process.exit(1);
      }, ms).unref();
    }
    void stop(signal)
      .catch((err: unknown) => {
        process.stderr.write(`error while stopping: ${String(err)}\n`);
        process.exitCode = 4;
      })
      .finally(() => {
        // Stopped. A socket left hung by a partition must not keep the process alive after that.
        setTimeout(
          () => process.exit(typeof process.exitCode === 'number' ? process.exitCode : 0),
          STOPPED_EXIT_MS,
        ).unref();
      });
  };
  process.on('SIGINT', handler);
  process.on('SIGTERM', handler);
  return () => {
    process.off('SIGINT', handler);
    process.off('SIGTERM', handler);
  };
}

/** After a stop finished, how long the process may take to end by itself before it is ended. */
const STOPPED_EXIT_MS = 1000;

export interface ServeOptions<T> {
  /**
   * Starts the service. `signal` aborts when a stop signal comes during the start: a start that
   * honours it rejects with the signal's reason (or an error caused by it) having left nothing
   * open; one that does not is stopped once it is through.
   */
  start(signal: AbortSignal): Promise<T>;
  /** Closes what `start` returned. */
  stop(started: T): Promise<void>;
  /** As ShutdownOptions.forceAfterMs. */
  forceAfterMs?: number;
}

/**
 * A service command's life, from the moment its action runs: the signal handlers are installed
 * before the start, so a SIGTERM while it is under way (a worker waiting for room in a full Redis
 * can wait for hours) ends the process as gracefully as one after it, never by Node's default of
 * dying by the signal. Resolves with whether the service had started when it was stopped. A
 * start that fails on its own rejects with its error, signal or not (a port in use is said, not
 * hidden behind the stop).
 */
export async function serveUntilSignal<T>(options: ServeOptions<T>): Promise<{ started: boolean }> {
  const stopping = new AbortController();
  const life: { starting?: Promise<T> } = {};
  let removeHandlers = (): void => undefined;
  const stopped = new Promise<{ started: boolean }>((resolve, reject) => {
    removeHandlers = onShutdown(
      async () => {
        stopping.abort();
        let value: T;
        try {
          // Set before any signal can come: signals are delivered by the event loop.
          value = await life.starting!;
        } catch (err) {
          if (abortedBy(err, stopping.signal)) resolve({ started: false });
          else reject(err);
          return;
        }
        await options.stop(value);
        resolve({ started: true });
      },
      options.forceAfterMs !== undefined ? { forceAfterMs: options.forceAfterMs } : {},
    );
  });
  life.starting = options.start(stopping.signal);
  try {
    await life.starting;
  } catch (err) {
    if (!stopping.signal.aborted) {
      removeHandlers();
      throw err;
    }
  }
  return stopped;
}

/** Whether `err` is `signal`'s own abort (its reason, or an AbortError caused by it, as timers/promises rejects). */
function abortedBy(err: unknown, signal: AbortSignal): boolean {
  return signal.aborted && (err === signal.reason || (err instanceof Error && err.cause === signal.reason));
}

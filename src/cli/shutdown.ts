/**
 * Runs `stop` once on the first SIGINT/SIGTERM; a second signal exits at once (the operator
 * means it). Returns a function that removes the handlers.
 */
export function onShutdown(stop: (signal: NodeJS.Signals) => Promise<void>): () => void {
  let stopping = false;
  const handler = (signal: NodeJS.Signals) => {
    if (stopping) {
      process.stderr.write(`\n${signal} again: exiting now\n`);
      process.exit(130);
    }
    stopping = true;
    process.stderr.write(`\n${signal}: finishing in-flight requests, then stopping (again to force)\n`);
    void stop(signal).catch((err: unknown) => {
      process.stderr.write(`error while stopping: ${String(err)}\n`);
      process.exitCode = 4;
    });
  };
  process.on('SIGINT', handler);
  process.on('SIGTERM', handler);
  return () => {
    process.off('SIGINT', handler);
    process.off('SIGTERM', handler);
  };
}

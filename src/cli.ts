import { CommanderError } from 'commander';
import { buildProgram, EXIT, registrationsFor } from './cli/light.js';
import { errorEntry, errorMessage, isCrmSyncError } from './errors/index.js';

/** ioredis's words for a command that got no answer (commandTimeout, or a connection that closed). */
const REDIS_SILENT = /^(Command timed out|Connection is closed\.|Stream isn't writeable)/;

// The entry point only parses arguments and maps failures to exit codes; commands call the library.
async function main(argv: string[]): Promise<number> {
  const program = buildProgram(await registrationsFor(argv.slice(2)));
  try {
    await program.parseAsync(argv);
    return typeof process.exitCode === 'number' ? process.exitCode : EXIT.OK;
  } catch (err) {
    if (err instanceof CommanderError) {
      return err.exitCode === 0 ? EXIT.OK : EXIT.USAGE;
    }
    if (isCrmSyncError(err)) {
      process.stderr.write(`crm-sync: ${err.message} [${err.code}]\n`);
      return errorEntry(err.code).exit;
    }
    if (err instanceof Error && REDIS_SILENT.test(err.message)) {
      // ioredis's commandTimeout: a Redis that is down, partitioned or behind a half-open socket.
      process.stderr.write(
        `crm-sync: Redis did not answer in time (${err.message}): check that it is reachable (REDIS_URL) [REDIS_UNAVAILABLE]\n`,
      );
      return EXIT.INTERNAL;
    }
    process.stderr.write(
      `crm-sync: unexpected error: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
    );
    return EXIT.INTERNAL;
  }
}

// `crm-sync runs export … | head` closes the pipe early: that is not an error worth a stack.
process.stdout.on('error', (err: NodeJS.ErrnoException) => {
  // Not a setting: no exit code set yet means success so far.
  if (err.code === 'EPIPE') process.exit(process.exitCode ?? 0);
  throw err;
});

// Tracing starts before any queue, worker or client exists (they pick it up when built) and is
// off unless OTEL_* variables ask for it (telemetrySettingsFromEnv decides which do); its shutdown
// sends the spans still buffered. Without any OTEL_* variable the module is not even loaded.
const telemetry = Object.keys(process.env).some((name) => name.startsWith('OTEL_'))
  ? await import('./telemetry/index.js')
      .then(({ startTelemetry }) => startTelemetry())
      .catch((err: unknown) => {
        process.stderr.write(`crm-sync: ${errorMessage(err)} [CONFIG_INVALID]\n`);
        return process.exit(EXIT.USAGE);
      })
  : { shutdown: async () => undefined };
process.exitCode = await main(process.argv);
await telemetry.shutdown();
// Every command has finished its work when main returns (long-running ones return at shutdown).
// A handle something left open (a connection a failed start did not close) must not keep a cron
// job waiting forever: give pending output a moment, then exit.
setTimeout(() => process.exit(), 2000).unref();

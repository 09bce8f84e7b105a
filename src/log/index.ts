import { createRequire } from 'node:module';
import { pino, type Logger } from 'pino';
import type pinoPretty from 'pino-pretty';
import { traceLogFields } from '../telemetry/log-fields.js';

export type { Logger };

/** Paths pino blanks out in every log line: API keys and tokens, wherever they sit. */
export const REDACT_PATHS = [
  'apiKey',
  '*.apiKey',
  'api_key',
  '*.api_key',
  'token',
  '*.token',
  'authorization',
  '*.authorization',
  'headers["x-api-key"]',
  '*.headers["x-api-key"]',
  'headers.authorization',
  '*.headers.authorization',
  'headers.cookie',
  '*.headers.cookie',
];

export interface LoggerOptions {
  /** pino level. Default `info`. */
  level?: string;
  /** Pretty, colourised lines instead of JSON. Default: stderr is a TTY. */
  pretty?: boolean;
  /** Fields on every line (run id, workspace, …). */
  base?: Record<string, unknown>;
}

/**
 * Logs go to stderr so that stdout stays clean for `--json` output and CSV streams.
 * JSON by default (for log shippers), pretty on a terminal.
 */
export function createLogger(options: LoggerOptions = {}): Logger {
  const level = options.level ?? 'info';
  const usePretty = options.pretty ?? Boolean(process.stderr.isTTY);
  const opts = {
    level,
    redact: { paths: REDACT_PATHS, censor: '[redacted]' },
    base: options.base ?? {},
    mixin: traceLogFields,
  };
  if (usePretty) {
    return pino(
      opts,
      loadPretty()({ destination: 2, sync: true, colorize: true, singleLine: true, ignore: 'pid,hostname' }),
    );
  }
  return pino(opts, pino.destination({ dest: 2, sync: true }));
}

/**
 * pino-pretty (and its colour and date helpers) is loaded only when a terminal asks for it:
 * workers in containers log JSON and never pay for it. Required, not imported, because
 * createLogger is synchronous; pino-pretty is CommonJS.
 */
function loadPretty(): typeof pinoPretty {
  return createRequire(import.meta.url)('pino-pretty') as typeof pinoPretty;
}

/** A logger that drops everything, for library use and tests that do not look at logs. */
export const silentLogger: Logger = pino({ level: 'silent' });

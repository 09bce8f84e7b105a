import { createRequire } from 'node:module';
import { pino, type Logger } from 'pino';
import type pinoPretty from 'pino-pretty';
import { traceLogFields } from './trace-fields.js';
export { traceLogFields };

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

/** What the log is read by: a person at the command (`import`, `demo`, `sim`) or a log store (a service). */
export type LogAudience = 'person' | 'service';

/** The environment variable that asks for one format whatever the command: `json` or `pretty`. */
export const LOG_FORMAT_ENV = 'LOG_FORMAT';

export interface LoggerOptions {
  /** pino level. Default `info`. */
  level?: string;
  /** Pretty lines instead of JSON. Default: from LOG_FORMAT, else by `audience`. */
  pretty?: boolean;
  /**
   * Who reads the lines when neither `pretty` nor LOG_FORMAT says: a person gets pretty lines
   * wherever stderr goes (a pipe, a CI log); a service (worker, scheduler, dashboard) JSON off a
   * terminal, for log shippers. Default `service`.
   */
  audience?: LogAudience;
  /** Fields on every line (run id, workspace, …). */
  base?: Record<string, unknown>;
}

/**
 * Pretty or JSON: an explicit option wins, then LOG_FORMAT (`json`, `pretty`), then the
 * audience: JSON only for a service whose stderr is not a terminal (its output is a log).
 */
export function wantsPretty(options: Pick<LoggerOptions, 'pretty' | 'audience'>, env = process.env): boolean {
  if (options.pretty !== undefined) return options.pretty;
  const asked = env[LOG_FORMAT_ENV]?.trim().toLowerCase();
  if (asked === 'json') return false;
  if (asked === 'pretty') return true;
  return options.audience === 'person' || Boolean(process.stderr.isTTY);
}

/**
 * Logs go to stderr so that stdout stays clean for `--json` output and CSV streams. Pretty
 * wherever a person reads them (wantsPretty), with colour only on a terminal.
 */
export function createLogger(options: LoggerOptions = {}): Logger {
  const level = options.level ?? 'info';
  const usePretty = wantsPretty(options);
  const opts = {
    level,
    redact: { paths: REDACT_PATHS, censor: '[redacted]' },
    base: options.base ?? {},
    mixin: traceLogFields,
  };
  if (usePretty) {
    return pino(
      opts,
      loadPretty()({
        destination: 2,
        sync: true,
        colorize: Boolean(process.stderr.isTTY),
        singleLine: true,
        ignore: 'pid,hostname',
        translateTime: 'UTC:HH:MM:ss',
      }),
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

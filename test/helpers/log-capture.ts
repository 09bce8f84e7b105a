import { pino } from 'pino';
import type { Logger } from '../../src/log/index.js';

/** A parsed pino line: level (30 info, 40 warn, 50 error), message and the line's fields. */
export interface LogLine {
  level: number;
  msg: string;
  time: number;
  [field: string]: unknown;
}

/** A real pino logger whose JSON lines are kept, parsed, in `lines` (for tests that check what is said). */
export function captureLogger(level: pino.Level = 'debug'): { logger: Logger; lines: LogLine[] } {
  const lines: LogLine[] = [];
  const logger = pino({ level }, { write: (line: string) => void lines.push(JSON.parse(line) as LogLine) });
  return { logger, lines };
}

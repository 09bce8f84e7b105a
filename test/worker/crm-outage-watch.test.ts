import { setTimeout as sleep } from 'node:timers/promises';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { CrmOutageWatch } from '../../src/worker/crm-outage-watch.js';

interface Line {
  level: number;
  msg: string;
  seconds?: number;
  requestsFailed?: number;
  jobsWaiting?: number;
}

function capture() {
  const lines: Line[] = [];
  const logger = pino({ level: 'debug' }, { write: (line: string) => void lines.push(JSON.parse(line) as Line) });
  return { logger, lines };
}

describe('CRM outage lines', () => {
  it('warns once when requests keep failing past the threshold, with counts, and says when the CRM answers again', async () => {
    const { logger, lines } = capture();
    const watch = new CrmOutageWatch({ logger, thresholdMs: 200, rowsWaiting: async () => 42 });
    watch.onFailure('ECONNREFUSED');
    watch.onFailure('ECONNREFUSED');
    expect(lines).toEqual([]); // a blip is not an outage
    await sleep(250);
    watch.onFailure('ECONNREFUSED');
    watch.onFailure('ECONNREFUSED');
    await sleep(10);
    const warnings = lines.filter((l) => l.level === 40);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatchObject({ requestsFailed: 3, jobsWaiting: 42 });
    expect(warnings[0]?.msg).toMatch(/has not answered a request successfully/);
    watch.onSuccess();
    expect(lines.at(-1)).toMatchObject({ level: 30, requestsFailed: 4 });
    expect(lines.at(-1)?.msg).toMatch(/answers again/);
    // A success resets it: the next failure starts a new count, with no line yet.
    watch.onFailure('503');
    watch.onSuccess();
    expect(lines).toHaveLength(2);
  });
});

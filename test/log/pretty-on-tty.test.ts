import { createRequire } from 'node:module';
import { describe, expect, it } from 'vitest';
import { createLogger } from '../../src/log/index.js';

const loaded = () => Object.keys(createRequire(import.meta.url).cache).some((p) => p.includes('/pino-pretty/'));

describe('pino-pretty', () => {
  it('is loaded only when pretty lines are asked for (a terminal), never for JSON logs', () => {
    createLogger({ pretty: false });
    expect(loaded()).toBe(false);
    createLogger({ pretty: true, level: 'silent' });
    expect(loaded()).toBe(true);
  });
});

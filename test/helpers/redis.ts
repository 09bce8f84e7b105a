import { randomBytes } from 'node:crypto';
import { DEFAULT_REDIS_URL } from '../../src/config/index.js';

/**
 * The Redis every integration test uses: REDIS_URL, else the local default. Its database
 * number (if any) is kept as given and never assumed: tests stay apart by key prefix.
 */
export const TEST_REDIS_URL = process.env.REDIS_URL ?? DEFAULT_REDIS_URL;

/** A key prefix of its own for one test or file (removed by the test when it ends). */
export function testPrefix(kind: string): string {
  return `crm-sync-test-${kind}-${randomBytes(4).toString('hex')}`;
}

/** Host and port of the test Redis, for a proxy put in front of it. */
export function testRedisAddress(): { host: string; port: number } {
  const url = new URL(TEST_REDIS_URL);
  return { host: url.hostname || '127.0.0.1', port: Number(url.port || 6379) };
}

/** The test Redis's URL reached through a proxy on loopback: credentials and database kept. */
export function testRedisUrlVia(port: number): string {
  const url = new URL(TEST_REDIS_URL);
  url.hostname = '127.0.0.1';
  url.port = String(port);
  return url.toString();
}

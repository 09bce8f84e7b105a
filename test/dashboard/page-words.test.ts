import { describe, expect, it } from 'vitest';
import { pausedWords } from '../../src/queue/index.js';
import { planLabel } from '../../src/dashboard/plan-pages.js';
import { firstTable, runLabel } from '../../src/dashboard/status-words.js';
import { normaliseMessage, runMatches, type RunRecord } from '../../src/runs/index.js';

describe('error-group masking', () => {
  it("masks a row's values, not the message's own quotes", () => {
    expect(normaliseMessage('email: "bob.example.com" is not an e-mail address: it has no "@"')).toBe(
      'email: "…" is not an e-mail address: it has no "@"',
    );
    expect(normaliseMessage('email: "a..b@x.io" has a misplaced "." before the "@"')).toBe(
      'email: "…" has a misplaced "." before the "@"',
    );
    expect(normaliseMessage('flag: "maybe" must be "true" or "false"')).toBe('flag: "…" must be "true" or "false"');
  });
});

describe('pause words', () => {
  it('says the default reason once', () => {
    expect(pausedWords('paused by an operator')).toBe('paused by an operator');
    expect(pausedWords('paused from the dashboard')).toBe('paused from the dashboard');
    expect(pausedWords('nightly maintenance')).toBe('paused by an operator: nightly maintenance');
    expect(pausedWords('')).toBe('paused by an operator');
  });
});

describe('a run short label', () => {
  const base = { source: '/data/in/deals-2026-11.csv', options: {} };
  it('names a file run by its file, a sync by its name', () => {
    expect(runLabel(base)).toBe('deals-2026-11.csv');
    expect(runLabel({ ...base, syncName: 'deals-nightly' })).toBe('Nightly sync “deals-nightly”');
  });

  it("names a PostgreSQL run by its query's first table, not its whole query", () => {
    const query =
      'SELECT d.id,\n       d.name\n  FROM "crm".deals d\n  JOIN owners o ON o.id = d.owner\n WHERE d.changed';
    const run = { source: `postgres ($PG_URL): ${query.replace(/\s+/g, ' ')}`, options: { query: { query } } };
    expect(runLabel(run)).toBe('PostgreSQL: crm.deals');
    expect(firstTable('select 1')).toBeUndefined();
    expect(runLabel({ source: 'postgres ($X): select 1', options: { query: { query: 'select 1' } } })).toBe(
      'PostgreSQL query',
    );
  });

  it('names a piped run "stdin", not by its spool file', () => {
    const run = {
      source: '/var/crm-sync/results/stdin/stdin-2026-11-26T01-02-03-123Z-a1b2c3.ndjson',
      options: { format: 'ndjson' as const },
    };
    expect(runLabel(run)).toBe('stdin (ndjson)');
  });
});

describe('a plan and its run, in short', () => {
  it("names a plan by its file or its query's first table", () => {
    expect(planLabel({ source: '/data/in/renames.csv' })).toBe('renames.csv');
    expect(planLabel({ source: 'postgres ($PG_URL): SELECT id, name FROM crm.contacts' })).toBe(
      'PostgreSQL: crm.contacts',
    );
    expect(planLabel({ source: 'stdin' })).toBe('stdin');
  });

  it("names the run of an applied plan by the plan's file, not by the whole source line", () => {
    const id = 'plan-20261126-010203-456-abcdefgh';
    expect(runLabel({ source: `plan ${id} (/data/in/renames.csv)`, options: { plan: id } })).toBe('Plan: renames.csv');
    expect(runLabel({ source: 'something else', options: { plan: id } })).toBe(`Plan: ${id}`);
  });
});

describe('searching runs', () => {
  it('finds a run by its label (import --name)', () => {
    const run = { id: 'r1', source: '/tmp/x.csv', options: { label: 'Q4 owners' } } as unknown as RunRecord;
    expect(runMatches(run, 'q4 own')).toBe(true);
  });
});

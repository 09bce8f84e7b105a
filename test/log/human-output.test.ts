import { afterAll, describe, expect, it } from 'vitest';
import { wantsPretty } from '../../src/log/index.js';
import { csv, startHarness, type Harness } from '../helpers/pipeline.js';
import { cliFor, startCli } from '../helpers/run-cli.js';

/*
 * Output for a person stays words: a command a person runs (import, demo, sim) logs pretty lines
 * wherever its stderr goes (a pipe, a CI log), JSON only when asked (LOG_FORMAT=json) or when the
 * process is a service whose stderr is a log (worker, scheduler, dashboard off a terminal).
 */

const jsonLines = (text: string) => text.split('\n').filter((l) => l.trimStart().startsWith('{'));

describe('log format', () => {
  it('pretty for a person, JSON for a service off a terminal, LOG_FORMAT wins over both', () => {
    // Test processes' stderr is not a terminal: a service logs JSON there.
    expect(wantsPretty({ audience: 'service' }, {})).toBe(Boolean(process.stderr.isTTY));
    expect(wantsPretty({ audience: 'person' }, {})).toBe(true);
    expect(wantsPretty({ audience: 'person' }, { LOG_FORMAT: 'json' })).toBe(false);
    expect(wantsPretty({ audience: 'service' }, { LOG_FORMAT: 'pretty' })).toBe(true);
    expect(wantsPretty({ audience: 'person', pretty: false }, { LOG_FORMAT: 'pretty' })).toBe(false);
  });

  async function simUntilStopped(env: NodeJS.ProcessEnv): Promise<{ stdout: string; stderr: string }> {
    const sim = startCli(['sim', '--port', '0'], { ...process.env, ...env });
    for (let i = 0; i < 200 && !sim.stdout.includes('listening on'); i++) await new Promise((r) => setTimeout(r, 50));
    expect(sim.stdout).toContain('CRM simulator listening on');
    sim.child.kill('SIGINT');
    await sim.exited;
    return { stdout: sim.stdout, stderr: sim.stderr };
  }

  it('the sim banner and its log lines are words when stderr is a pipe', async () => {
    const { stdout, stderr } = await simUntilStopped({ LOG_FORMAT: '' });
    expect(jsonLines(stdout)).toEqual([]);
    expect(jsonLines(stderr)).toEqual([]);
    expect(stderr).toMatch(/INFO.*simulator stopping/);
  }, 30_000);

  it('LOG_FORMAT=json asks for JSON lines', async () => {
    const { stderr } = await simUntilStopped({ LOG_FORMAT: 'json' });
    expect(jsonLines(stderr).some((l) => l.includes('"simulator stopping"'))).toBe(true);
  }, 30_000);
});

describe('import off a terminal', () => {
  let h: Harness | undefined;
  const cli = cliFor(() => h!);
  afterAll(async () => {
    await h?.close();
  });

  it('logs words on stderr, not JSON (a person reads it in a pipe or a CI log)', async () => {
    h = await startHarness({ records: 10 });
    const deals = [...h.ws.deals.values()].slice(0, 4);
    const file = h.file(
      'human.csv',
      csv(
        ['id', 'name'],
        deals.map((d) => [d.id, `${d.name} (again)`]),
      ),
    );
    // Debug level: the import's own lines, whatever it says at info, must all be words.
    const plain = await cli(['--log-level', 'debug', 'import', file, '--op', 'deal.update', '-w', 'acme', '--work'], {
      env: { LOG_FORMAT: '' },
    });
    expect(plain.code).toBe(0);
    expect(plain.stderr.split('\n').filter((l) => /(INFO|DEBUG|WARN)/.test(l)).length).toBeGreaterThan(0);
    expect(jsonLines(plain.stderr)).toEqual([]);
    const asked = await cli(['--log-level', 'debug', 'import', file, '--op', 'deal.update', '-w', 'acme', '--work'], {
      env: { LOG_FORMAT: 'json' },
    });
    expect(jsonLines(asked.stderr).length).toBeGreaterThan(0);
  }, 60_000);
});

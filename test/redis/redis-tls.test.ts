import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../src/runtime/index.js';
import { csv, startHarness, type Harness } from '../helpers/pipeline.js';
import { runCli, startCli, type RunningCli } from '../helpers/run-cli.js';

/*
 * Issue 42, item 3: `rediss://` with a password, as a managed Redis is reached. A private
 * redis-server speaks TLS only (`--port 0`), with a certificate from a throwaway CA made here
 * and `--requirepass`; `crm-sync worker` and `crm-sync import --wait` reach it through
 * REDIS_URL=rediss://:<password>@… with NODE_EXTRA_CA_CERTS naming the CA, as a user runs them.
 * The password is never printed, in any log line or message; a wrong one, a missing CA and a
 * missing password each end with an error that says which.
 */

const PASSWORD = `tls-pw-${Date.now().toString(36)}-Zq9`;

function openssl(args: string[], cwd: string): void {
  const r = spawnSync('openssl', args, { cwd, stdio: ['ignore', 'ignore', 'pipe'] });
  if (r.status !== 0) throw new Error(`openssl ${args[0]} failed: ${r.stderr.toString()}`);
}

/** A CA, and a certificate it signed for 127.0.0.1 / localhost, in `dir`. */
function makeCertificates(dir: string): { ca: string; cert: string; key: string } {
  openssl(
    ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'ca.key', '-out', 'ca.crt'].concat([
      '-days',
      '1',
      '-subj',
      '/CN=crm-sync test CA',
    ]),
    dir,
  );
  openssl(
    ['req', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'server.key', '-out', 'server.csr', '-subj', '/CN=localhost'],
    dir,
  );
  writeFileSync(join(dir, 'ext.cnf'), 'subjectAltName=IP:127.0.0.1,DNS:localhost\n');
  openssl(
    ['x509', '-req', '-in', 'server.csr', '-CA', 'ca.crt', '-CAkey', 'ca.key', '-CAcreateserial'].concat([
      '-out',
      'server.crt',
      '-days',
      '1',
      '-extfile',
      'ext.cnf',
    ]),
    dir,
  );
  return { ca: join(dir, 'ca.crt'), cert: join(dir, 'server.crt'), key: join(dir, 'server.key') };
}

describe('a Redis reached over TLS with a password (rediss://)', () => {
  let dir: string;
  let server: ChildProcess | undefined;
  let port: number;
  let ca: string;
  let admin: Redis;
  let h: Harness;
  let worker: RunningCli | undefined;
  const url = (password = PASSWORD) => `rediss://:${password}@127.0.0.1:${port}`;
  const envWith = (more: NodeJS.ProcessEnv) => {
    const env: NodeJS.ProcessEnv = { ...h.env, CI: 'true', ...more };
    for (const [k, v] of Object.entries(more)) if (v === undefined) delete env[k];
    return env;
  };
  const args = (rest: string[]) => ['--config', h.configPath, '--log-level', 'debug', ...rest];

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'crm-sync-tls-'));
    const certs = makeCertificates(dir);
    ca = certs.ca;
    port = await freePort();
    server = spawn(
      'redis-server',
      ['--port', '0', '--tls-port', String(port), '--bind', '127.0.0.1']
        .concat(['--tls-cert-file', certs.cert, '--tls-key-file', certs.key, '--tls-ca-cert-file', certs.ca])
        .concat([
          '--tls-auth-clients',
          'no',
          '--requirepass',
          PASSWORD,
          '--save',
          '',
          '--appendonly',
          'no',
          '--dir',
          dir,
        ]),
      { stdio: 'ignore' },
    );
    admin = new Redis(url(), { tls: { ca: readFileSync(ca) }, lazyConnect: true, maxRetriesPerRequest: 1 });
    admin.on('error', () => undefined);
    for (let i = 0; ; i++) {
      try {
        if (admin.status !== 'ready') await admin.connect();
        if ((await admin.ping()) === 'PONG') break;
      } catch (err) {
        if (i > 100) throw err;
        await sleep(50);
      }
    }
    h = await startHarness({ records: 5, createSettleMs: 300 });
  }, 60_000);
  afterAll(async () => {
    if (worker && worker.child.exitCode === null) {
      worker.child.kill('SIGKILL');
      await worker.exited;
    }
    admin?.disconnect();
    await h?.close();
    if (server && server.exitCode === null) {
      const exited = new Promise((resolve) => server!.once('exit', resolve));
      server.kill('SIGTERM');
      await exited;
    }
    rmSync(dir, { recursive: true, force: true });
  });

  it('a worker and `import --wait` run an import to its end through it; the password is never printed', async () => {
    const env = envWith({ REDIS_URL: url(), NODE_EXTRA_CA_CERTS: ca });
    worker = startCli(args(['worker', '-w', 'acme']), env);
    const rows = Array.from({ length: 12 }, (_, i) => [`TLS T ${i}`, 500 + i]);
    const file = h.file('tls.csv', csv(['name', 'value'], rows));
    const imported = await runCli(args(['import', file, '--op', 'deal.create', '-w', 'acme', '--wait', '--json']), env);
    expect(imported.code, imported.stderr).toBe(0);
    const run = JSON.parse(imported.stdout) as { id: string; status: string; counts: Record<string, number> };
    expect(run).toMatchObject({ status: 'completed', counts: { total: 12, succeeded: 12 } });
    expect([...h.ws.deals.values()].filter((d) => d.name.startsWith('TLS T '))).toHaveLength(12);
    // The run lives in the TLS Redis (not in the shared one the harness opened).
    expect(await admin.exists(`${h.env.CRM_SYNC_PREFIX}:runs`)).toBe(1);
    expect(await h.runtime.store.getRun(run.id)).toBeNull();
    const shown = await runCli(args(['runs', 'show', run.id]), env);
    expect(shown.code).toBe(0);
    expect(shown.stdout).toContain(run.id);

    worker.child.kill('SIGTERM');
    expect(await worker.exited).toBe(0);
    // The worker logged (debug lines included), never with the password.
    expect(worker.stderr.length).toBeGreaterThan(0);
    for (const out of [worker.stdout, worker.stderr, imported.stdout, imported.stderr, shown.stdout, shown.stderr])
      expect(out).not.toContain(PASSWORD);
  }, 120_000);

  it('a wrong password, no password and an unknown CA each end with exit 4 saying which, the password never shown', async () => {
    const wrong = `${PASSWORD}-not`;
    const bad = await runCli(args(['runs', 'list']), envWith({ REDIS_URL: url(wrong), NODE_EXTRA_CA_CERTS: ca }));
    expect(bad.code).toBe(4);
    expect(bad.stderr).toMatch(/WRONGPASS.*wants a password that REDIS_URL does not give, or gives wrong/s);
    expect(bad.stderr).toContain('rediss://:***@127.0.0.1');
    expect(bad.stderr + bad.stdout).not.toContain(wrong);

    const none = await runCli(
      args(['runs', 'list']),
      envWith({ REDIS_URL: `rediss://127.0.0.1:${port}`, NODE_EXTRA_CA_CERTS: ca }),
    );
    expect(none.code).toBe(4);
    expect(none.stderr).toMatch(/NOAUTH.*wants a password that REDIS_URL does not give/s);

    const untrusted = await runCli(
      args(['runs', 'list']),
      envWith({ REDIS_URL: url(), NODE_EXTRA_CA_CERTS: undefined }),
    );
    expect(untrusted.code).toBe(4);
    expect(untrusted.stderr).toMatch(/certificate.*TLS: .*NODE_EXTRA_CA_CERTS=/s);
    expect(untrusted.stderr + untrusted.stdout).not.toContain(PASSWORD);
  }, 60_000);
});

import { networkInterfaces } from 'node:os';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildDashboard } from '../../src/dashboard/index.js';
import { startHarness, type Harness } from '../helpers/pipeline.js';
import { runCli } from '../helpers/run-cli.js';
import { ask, csrfOf, form, startLiveDashboard, secretLeaks, type LiveDashboard } from './live-dashboard.js';

/** Findings: --insecure-no-auth checked no Host, let any bearer header skip CSRF, bound anywhere. */
let h: Harness;
let d: LiveDashboard;
beforeAll(async () => {
  h = await startHarness({ records: 3 });
  d = await startLiveDashboard({ harness: h, token: null });
});
afterAll(async () => {
  await d?.close();
  await h?.close();
});

describe('--insecure-no-auth is for this machine only', () => {
  it('answers only requests whose Host is a loopback name or address (DNS rebinding)', async () => {
    for (const host of [
      d.host,
      `localhost:${d.port}`,
      `dash.localhost:${d.port}`,
      `[::1]:${d.port}`,
      `127.1.2.3:${d.port}`,
    ]) {
      expect((await d.ask({ path: '/', headers: { host } })).status, host).toBe(200);
    }
    for (const host of [
      'evil.example',
      `evil.example:${d.port}`,
      `127.0.0.1.evil.example:${d.port}`,
      `192.168.1.10:${d.port}`,
      `[::ffff:7f00:1]:${d.port}`,
      'localhost.evil.example',
    ]) {
      const res = await d.ask({ path: '/healthz', headers: { host } });
      expect(res.status, host).toBe(403);
      expect(res.text).toContain('answers only to a loopback host name');
    }
  });

  it('answers only connections from a loopback address, whatever Host they name', async () => {
    // Started in code on every interface (the CLI refuses that): the socket's own address must
    // still keep other machines out, even when they send a loopback Host.
    const app = await buildDashboard({ runtime: h.runtime, token: null });
    try {
      const port = Number(new URL(await app.listen({ port: 0, host: '0.0.0.0' })).port);
      const host = `127.0.0.1:${port}`;
      expect((await ask(port, { path: '/healthz', headers: { host } })).status).toBe(200);
      // This machine's own non-loopback address stands in for another machine on the network.
      const external = Object.values(networkInterfaces())
        .flat()
        .find((i) => i !== undefined && i.family === 'IPv4' && !i.internal)?.address;
      if (external !== undefined) {
        const res = await ask(port, { path: '/', headers: { host }, via: external });
        expect(res.status, external).toBe(403);
        expect(res.text).toContain('only to this machine');
      }
      // Without such an interface (and as well), fastify's inject sets the peer address.
      for (const remoteAddress of ['192.168.1.10', '::ffff:10.0.0.7', 'fd00::2']) {
        const res = await app.inject({ url: '/healthz', headers: { host }, remoteAddress });
        expect(res.statusCode, remoteAddress).toBe(403);
      }
      for (const remoteAddress of ['127.0.0.1', '127.9.9.9', '::1', '::ffff:127.0.0.1']) {
        const res = await app.inject({ url: '/healthz', headers: { host }, remoteAddress });
        expect(res.statusCode, remoteAddress).toBe(200);
      }
    } finally {
      await app.close();
    }
  });

  it('a bearer header does not skip the cross-site checks (there is no token to prove anything)', async () => {
    const _csrf = csrfOf((await d.ask({ path: '/workspaces' })).text);
    const post = (headers: Record<string, string>, body = form({ _csrf })) =>
      d.ask({
        method: 'POST',
        path: '/workspaces/acme/pause',
        headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
        body,
      });
    expect((await post({ authorization: 'Bearer x' })).status).toBe(403);
    expect((await post({ authorization: 'Bearer x', origin: 'http://evil.example' })).status).toBe(403);
    expect((await post({ authorization: 'Bearer x', origin: d.origin }, '')).status).toBe(403);
    expect(await h.runtime.queue('acme').isPaused()).toBe(false);
    // The page itself still works: same origin, with its form token.
    expect((await post({ origin: d.origin })).status).toBe(303);
    expect(await h.runtime.queue('acme').isPaused()).toBe(true);
    await h.runtime.queue('acme').resume();
  });

  it('the CLI refuses a non-loopback --host, and a short token, saying what to do', async () => {
    const env = { ...h.env };
    delete env.CRM_SYNC_DASHBOARD_TOKEN;
    for (const host of ['0.0.0.0', '192.168.1.10', '::']) {
      const res = await runCli(
        ['--config', h.configPath, 'dashboard', '--insecure-no-auth', '--host', host, '--port', '0'],
        env,
      );
      expect(res.code, host).toBe(2);
      expect(res.stderr, host).toContain('--insecure-no-auth listens on loopback only');
    }
    const short = await runCli(['--config', h.configPath, 'dashboard', '--port', '0'], {
      ...env,
      CRM_SYNC_DASHBOARD_TOKEN: '7',
    });
    expect(short.code).toBe(2);
    expect(short.stderr).toMatch(
      /CRM_SYNC_DASHBOARD_TOKEN\) has 1 characters; it needs at least 32 \(make one with: openssl rand -hex 16\)/,
    );
  }, 60_000);
});

describe('secrets', () => {
  it('no answer this file got (any method) and no dashboard log line carries the API key, the token or the cookie secret', () => {
    expect(secretLeaks()).toEqual([]);
  });
});

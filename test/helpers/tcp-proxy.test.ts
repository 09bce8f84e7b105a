import { connect, createServer, type Server, type Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis, type RedisOptions } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startTcpProxy, type TcpProxy } from './tcp-proxy.js';
import { testRedisAddress, testRedisUrlVia } from './redis.js';

/** Every mode of the TCP proxy, over real sockets on 127.0.0.1: an echo server, then real Redis. */

const QUIET_MS = 500;

/** Resolves with the promise's value, or 'timeout' when it has not settled within `ms`. */
function within<T>(p: Promise<T>, ms: number): Promise<T | 'timeout'> {
  return Promise.race([p, sleep(ms).then(() => 'timeout' as const)]);
}

async function until(check: () => boolean, ms = 3000): Promise<void> {
  for (const deadline = Date.now() + ms; !check(); await sleep(10))
    if (Date.now() > deadline) throw new Error(`not met within ${ms} ms`);
}

/** A client socket that records what it received, its error code and whether it closed. */
interface Peer {
  socket: Socket;
  received: string;
  errorCode: string | undefined;
  closed: boolean;
}

function watch(socket: Socket): Peer {
  const peer: Peer = { socket, received: '', errorCode: undefined, closed: false };
  socket.on('data', (c: Buffer) => (peer.received += c.toString()));
  socket.on('error', (e: NodeJS.ErrnoException) => (peer.errorCode = e.code));
  socket.on('close', () => (peer.closed = true));
  return peer;
}

function dial(port: number): Promise<Peer> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port }).once('error', reject);
    socket.once('connect', () => resolve(watch(socket.off('error', reject))));
  });
}

describe('tcp proxy in front of an echo server', () => {
  // Echoes each chunk 100 ms late, so a test can blackhole between "received" and "answered".
  const serverPeers: Peer[] = [];
  let echo: Server;
  let echoPort = 0;
  let proxy: TcpProxy;
  const clients: Socket[] = [];
  const client = async (): Promise<Peer> => {
    const p = await dial(proxy.port);
    clients.push(p.socket);
    return p;
  };

  beforeAll(async () => {
    echo = createServer((s) => {
      serverPeers.push(watch(s));
      s.on('data', (c: Buffer) => setTimeout(() => !s.destroyed && s.write(c), 100));
    });
    await new Promise<void>((r) => echo.listen(0, '127.0.0.1', r));
    echoPort = (echo.address() as { port: number }).port;
  });
  afterEach(async () => {
    for (const s of clients.splice(0)) s.destroy();
    await proxy?.close();
  });
  afterAll(async () => {
    for (const p of serverPeers) p.socket.destroy();
    await new Promise<void>((r) => echo.close(() => r()));
  });

  it('passes bytes both ways and counts connections', async () => {
    proxy = await startTcpProxy({ upstreamPort: echoPort });
    expect(proxy.url('redis')).toBe(`redis://127.0.0.1:${proxy.port}`);
    const c = await client();
    c.socket.write('hello');
    await until(() => c.received === 'hello');
    expect(proxy.stats).toEqual({ accepted: 1, open: 1 });
    c.socket.end();
    await until(() => proxy.stats.open === 0);
  });

  it('blackhole holds bytes in both directions; heal("deliver") flushes them in order and the connection goes on', async () => {
    proxy = await startTcpProxy({ upstreamPort: echoPort });
    const c = await client();
    const before = serverPeers.length;
    c.socket.write('a');
    await until(() => serverPeers.length === before + 1 && serverPeers[before]?.received === 'a');
    const server = serverPeers[before] as Peer;
    proxy.blackhole(); // the echo of 'a' is due in <100 ms: it must be held on its way back
    c.socket.write('b');
    await sleep(QUIET_MS);
    expect(c.received).toBe(''); // upstream → client held
    expect(server.received).toBe('a'); // client → upstream held
    expect(c.closed || server.closed).toBe(false);
    proxy.heal('deliver');
    await until(() => c.received === 'ab');
    c.socket.write('c');
    await until(() => c.received === 'abc');
    expect(proxy.stats.accepted).toBe(1);
  });

  it('blackhole accepts new connections but does not connect them onward until heal', async () => {
    proxy = await startTcpProxy({ upstreamPort: echoPort });
    proxy.blackhole();
    const before = serverPeers.length;
    const c = await client(); // the connect succeeds: the proxy accepted it
    c.socket.write('x');
    await sleep(QUIET_MS);
    expect(serverPeers.length).toBe(before);
    expect(c.received).toBe('');
    proxy.heal();
    await until(() => c.received === 'x');
    expect(serverPeers.length).toBe(before + 1);
  });

  it('reset() sends RST to both sides and keeps accepting', async () => {
    proxy = await startTcpProxy({ upstreamPort: echoPort });
    const c = await client();
    c.socket.write('1');
    await until(() => c.received === '1');
    const server = serverPeers.at(-1) as Peer;
    proxy.reset();
    await until(() => c.closed && server.closed);
    expect(c.errorCode).toBe('ECONNRESET');
    expect(server.errorCode).toBe('ECONNRESET');
    const next = await client();
    next.socket.write('2');
    await until(() => next.received === '2');
  });

  it('heal("reset") resets the connections of the blackhole, new ones pass', async () => {
    proxy = await startTcpProxy({ upstreamPort: echoPort });
    const old = await client();
    proxy.blackhole();
    const bornInHole = await client();
    proxy.heal('reset');
    await until(() => old.closed && bornInHole.closed);
    expect([old.errorCode, bornInHole.errorCode]).toEqual(['ECONNRESET', 'ECONNRESET']);
    const fresh = await client();
    fresh.socket.write('ok');
    await until(() => fresh.received === 'ok');
  });

  it('heal("hang") leaves the connections of the blackhole silent for ever, new ones pass', async () => {
    proxy = await startTcpProxy({ upstreamPort: echoPort });
    const old = await client();
    proxy.blackhole();
    proxy.heal('hang');
    old.socket.write('lost');
    const fresh = await client();
    fresh.socket.write('ok');
    await until(() => fresh.received === 'ok');
    await sleep(QUIET_MS);
    expect(old.received).toBe('');
    expect(old.closed).toBe(false);
  });

  it('refuse() resets current connections and refuses new ones; heal() reopens the same port', async () => {
    proxy = await startTcpProxy({ upstreamPort: echoPort });
    const port = proxy.port;
    const c = await client();
    await proxy.refuse();
    await until(() => c.closed);
    expect(c.errorCode).toBe('ECONNRESET');
    await expect(dial(port)).rejects.toMatchObject({ code: 'ECONNREFUSED' });
    proxy.heal();
    expect(proxy.port).toBe(port);
    const again = await client();
    again.socket.write('back');
    await until(() => again.received === 'back');
  });

  it('an upstream that refuses reaches the client as a reset', async () => {
    const closed = createServer();
    await new Promise<void>((r) => closed.listen(0, '127.0.0.1', r));
    const deadPort = (closed.address() as { port: number }).port;
    await new Promise<void>((r) => closed.close(() => r()));
    proxy = await startTcpProxy({ upstreamPort: deadPort });
    const c = await client();
    await until(() => c.closed);
    expect(c.errorCode).toBe('ECONNRESET');
  });
});

describe('tcp proxy in front of real Redis', () => {
  let proxy: TcpProxy;
  const redises: Redis[] = [];
  // Quick reconnects and no ready check, so a reconnect shows within the test's bounds.
  const redis = (extra: RedisOptions = {}): Redis => {
    const r = new Redis(testRedisUrlVia(proxy.port), { retryStrategy: () => 50, enableReadyCheck: false, ...extra });
    r.on('error', () => {}); // resets are the point here; ioredis would log them as unhandled
    redises.push(r);
    return r;
  };

  beforeAll(async () => {
    const { host, port } = testRedisAddress();
    proxy = await startTcpProxy({ upstreamHost: host, upstreamPort: port });
  });
  afterEach(() => {
    for (const r of redises.splice(0)) r.disconnect();
    proxy.heal();
  });
  afterAll(async () => {
    await proxy.close();
  });

  it('PING passes; in a blackhole it does not answer; heal("deliver") answers the held PING on the same socket', async () => {
    const r = redis();
    expect(await r.ping()).toBe('PONG');
    const accepted = proxy.stats.accepted;
    proxy.blackhole();
    const held = r.ping();
    expect(await within(held, QUIET_MS)).toBe('timeout');
    proxy.heal('deliver');
    expect(await within(held, 2000)).toBe('PONG');
    expect(proxy.stats.accepted).toBe(accepted); // no reconnect happened
  });

  it('heal("reset") makes ioredis see a close and reconnect', async () => {
    const r = redis();
    expect(await r.ping()).toBe('PONG');
    let closes = 0;
    r.on('close', () => closes++);
    const accepted = proxy.stats.accepted;
    proxy.blackhole();
    const held = r.ping().catch((e: Error) => e);
    expect(await within(held, QUIET_MS)).toBe('timeout');
    proxy.heal('reset');
    await until(() => closes > 0);
    expect(await within(r.ping(), 2000)).toBe('PONG');
    expect(proxy.stats.accepted).toBeGreaterThan(accepted);
    await within(held, 2000); // resent after the reconnect (autoResendUnfulfilledCommands) or failed
  });

  it('heal("hang") keeps the old socket silent while a new client connects fine', async () => {
    const old = redis();
    expect(await old.ping()).toBe('PONG');
    proxy.blackhole();
    proxy.heal('hang');
    const lost = old.ping().catch((e: Error) => e);
    const fresh = redis();
    expect(await within(fresh.ping(), 2000)).toBe('PONG');
    expect(await within(lost, QUIET_MS)).toBe('timeout');
    expect(old.status).toBe('ready'); // ioredis has no idea: nothing closed
  });

  it('delayMs holds every byte that long each way, in order, also across a change of delay', async () => {
    const { host, port } = testRedisAddress();
    const slow = await startTcpProxy({ upstreamHost: host, upstreamPort: port, delayMs: 40 });
    const r = new Redis(testRedisUrlVia(slow.port), { enableReadyCheck: false });
    try {
      await r.ping();
      const t0 = performance.now();
      expect(await r.ping()).toBe('PONG');
      // A lower bound only (a loaded machine is slower, never faster): the round trip is 2 × 40 ms.
      expect(performance.now() - t0).toBeGreaterThanOrEqual(79);
      // Sent under the old delay and the new one: the replies still come in order.
      const order: string[] = [];
      const echo = (i: number): Promise<void> => r.echo(String(i)).then((x) => void order.push(x));
      const early = Array.from({ length: 10 }, (_, i) => echo(i));
      await sleep(5); // the first ten are on their way, held for 40 ms
      slow.setDelay(0);
      const late = Array.from({ length: 10 }, (_, i) => echo(10 + i));
      await Promise.all([...early, ...late]);
      expect(order).toEqual(Array.from({ length: 20 }, (_, i) => String(i)));
    } finally {
      r.disconnect();
      await slow.close();
    }
  });

  it('refuse gives ECONNREFUSED, heal reopens', async () => {
    await proxy.refuse();
    const r = redis({ lazyConnect: true, retryStrategy: () => null });
    // connect() rejects with "Connection is closed."; the socket's own error is on the event.
    const socketError = new Promise<NodeJS.ErrnoException>((resolve) => r.once('error', resolve));
    await expect(r.connect()).rejects.toThrow();
    expect(await socketError).toMatchObject({ code: 'ECONNREFUSED' });
    proxy.heal();
    expect(await within(redis().ping(), 2000)).toBe('PONG');
  });
});

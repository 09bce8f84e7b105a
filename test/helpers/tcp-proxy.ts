import { connect, createServer, type Server, type Socket } from 'node:net';

/**
 * A TCP fault-injection proxy for tests: one listener on 127.0.0.1 in front of one upstream,
 * able to partition (blackhole), reset, refuse and heal the way a real network does, so a
 * client's reconnect and timeout logic meets the failures it will meet in production.
 * Dependency-free on purpose: node:net only.
 */

export interface TcpProxyOptions {
  /** Default 127.0.0.1. */
  upstreamHost?: string;
  upstreamPort: number;
  /**
   * Delay every byte this long (ms) in each direction, in order: a Redis a network hop away
   * (issue 42). Default 0. `setDelay` changes it for bytes that arrive afterwards.
   */
  delayMs?: number;
}

export type HealMode = 'deliver' | 'reset' | 'hang';

export interface TcpProxy {
  readonly port: number;
  /** `redis://127.0.0.1:<port>` style helper. */
  url(scheme: string): string;
  /**
   * Partition: every existing and new connection stays open but nothing passes either way (bytes
   * are held, as TCP would hold unacknowledged data). New connections are accepted by the proxy
   * but not connected onward (like SYNs into a black hole: the client sees an open socket that
   * never answers).
   */
  blackhole(): void;
  /** Destroys every current connection with a TCP RST on both sides; new ones are accepted in the current mode. */
  reset(): void;
  /**
   * Ends a blackhole (and a refuse: the listener reopens on the same port, bound before any I/O
   * the caller starts afterwards). 'deliver' (default): held bytes are flushed and connections go
   * on; 'reset': connections that existed during the blackhole are reset, new ones pass; 'hang':
   * those connections stay hung for ever (lost NAT/conntrack state), new ones pass.
   */
  heal(mode?: HealMode): void;
  /** Refuse: closes the listener so new connections get ECONNREFUSED and resets current ones. */
  refuse(): Promise<void>;
  /** `accepted`: connections accepted since start; `open`: client sockets not yet closed (hung ones included). */
  readonly stats: { accepted: number; open: number };
  /** The delay each way from now on (ms); bytes already delayed keep theirs, and order is kept. */
  setDelay(ms: number): void;
  /** Destroys every connection and stops listening; rejects if a reopen after refuse() failed. */
  close(): Promise<void>;
}

/** What crossed a held connection, replayed in order on heal('deliver'). */
type Held = Buffer | 'end' | 'reset';
/** `pass`: bytes flow; `held`: blackholed, queued; `hung`: dropped for ever. */
type ConnState = 'pass' | 'held' | 'hung';

interface Conn {
  client: Socket;
  /** Undefined while a connection born in a blackhole has not been connected onward. */
  upstream: Socket | undefined;
  state: ConnState;
  toUpstream: Held[];
  toClient: Held[];
  /** Items on their way through the delay (delayMs), per direction, due in order. */
  delayed: { upstream: DelayLine; client: DelayLine };
}

/** One direction's delayed items: each is due at its time, never before the one ahead of it. */
interface DelayLine {
  items: { due: number; item: Held }[];
  timer: NodeJS.Timeout | undefined;
}

/** RST instead of FIN, so the peer sees ECONNRESET like after a middlebox or host failure. */
function rst(socket: Socket | undefined): void {
  if (!socket || socket.destroyed) return;
  try {
    if (typeof socket.resetAndDestroy === 'function') socket.resetAndDestroy();
    else socket.destroy();
  } catch {
    // resetAndDestroy throws on a handle that is not TCP; a plain destroy still ends it.
    socket.destroy();
  }
}

export async function startTcpProxy(options: TcpProxyOptions): Promise<TcpProxy> {
  const upstreamHost = options.upstreamHost ?? '127.0.0.1';
  const conns = new Set<Conn>();
  const stats = { accepted: 0, open: 0 };
  let blackholed = false;
  let listening = false;
  let listenError: Error | undefined;
  let port = 0;
  let delayMs = Math.max(0, options.delayMs ?? 0);

  /**
   * Passes an item on after the delay (at once with none). Due times never go backwards, so a
   * change of delay cannot reorder bytes; one timer per direction drains what is due.
   */
  const delayed = (conn: Conn, to: 'upstream' | 'client', item: Held): void => {
    const line = conn.delayed[to];
    if (delayMs === 0 && line.items.length === 0) return forward(conn, to, item);
    const last = line.items.at(-1)?.due ?? 0;
    line.items.push({ due: Math.max(last, performance.now() + delayMs), item });
    if (line.timer === undefined) drain(conn, to);
  };

  const drain = (conn: Conn, to: 'upstream' | 'client'): void => {
    const line = conn.delayed[to];
    line.timer = undefined;
    const now = performance.now();
    while (line.items.length > 0 && line.items[0]!.due <= now) forward(conn, to, line.items.shift()!.item);
    const next = line.items[0];
    if (next) line.timer = setTimeout(() => drain(conn, to), Math.max(0, next.due - now));
  };

  /** Sends one item to `to`, now if the connection passes, later if it is held, never if hung. */
  const forward = (conn: Conn, to: 'upstream' | 'client', item: Held): void => {
    if (conn.state === 'hung') return;
    if (conn.state === 'held') {
      (to === 'upstream' ? conn.toUpstream : conn.toClient).push(item);
      return;
    }
    const socket = to === 'upstream' ? conn.upstream : conn.client;
    if (!socket || socket.destroyed) return;
    if (item === 'end') socket.end();
    else if (item === 'reset') rst(socket);
    else socket.write(item);
  };

  const connectUpstream = (conn: Conn): void => {
    const upstream = connect({ host: upstreamHost, port: options.upstreamPort, allowHalfOpen: true });
    conn.upstream = upstream;
    upstream.setNoDelay(true);
    upstream.on('data', (chunk: Buffer) => delayed(conn, 'client', chunk));
    upstream.on('end', () => delayed(conn, 'client', 'end'));
    // An upstream error (refused, reset) reaches the client as a reset, not as a clean close.
    upstream.on('error', () => delayed(conn, 'client', 'reset'));
    upstream.on('close', () => {
      if (conn.client.destroyed) conns.delete(conn);
    });
  };

  const hold = (conn: Conn): void => {
    conn.state = 'held';
    // Pausing lets the kernel buffers fill, so a writer feels back-pressure as on a dead path.
    conn.client.pause();
    conn.upstream?.pause();
  };

  const onConnection = (client: Socket): void => {
    stats.accepted++;
    stats.open++;
    const conn: Conn = {
      client,
      upstream: undefined,
      state: 'pass',
      toUpstream: [],
      toClient: [],
      delayed: { upstream: { items: [], timer: undefined }, client: { items: [], timer: undefined } },
    };
    conns.add(conn);
    client.setNoDelay(true);
    client.on('data', (chunk: Buffer) => delayed(conn, 'upstream', chunk));
    client.on('end', () => delayed(conn, 'upstream', 'end'));
    client.on('error', () => delayed(conn, 'upstream', 'reset'));
    // A FIN is forwarded as a FIN (half-close), so each socket closes once both of its sides ended.
    client.on('close', () => {
      stats.open--;
      // Kept while the upstream side lives, so reset() and close() still reach it.
      if (!conn.upstream || conn.upstream.destroyed) conns.delete(conn);
    });
    if (blackholed) hold(conn);
    else connectUpstream(conn);
  };

  const server: Server = createServer({ allowHalfOpen: true }, onConnection);
  const listen = (at: number): Promise<void> =>
    new Promise((resolve, reject) => {
      const onError = (err: Error): void => reject(err);
      server.once('error', onError);
      server.listen(at, '127.0.0.1', () => {
        server.off('error', onError);
        listening = true;
        const address = server.address();
        if (address && typeof address === 'object') port = address.port;
        resolve();
      });
    });
  await listen(0);

  const resetAll = (): void => {
    for (const conn of [...conns]) {
      conn.state = 'hung'; // so the close events of one side do not try to replay onto the other
      for (const line of [conn.delayed.upstream, conn.delayed.client]) {
        clearTimeout(line.timer);
        line.timer = undefined;
        line.items.length = 0;
      }
      rst(conn.client);
      rst(conn.upstream);
      conns.delete(conn);
    }
  };

  return {
    get port() {
      return port;
    },
    url: (scheme) => `${scheme}://127.0.0.1:${port}`,
    stats,
    setDelay(ms) {
      delayMs = Math.max(0, ms);
    },
    blackhole() {
      blackholed = true;
      for (const conn of conns) if (conn.state === 'pass') hold(conn);
    },
    reset: resetAll,
    heal(mode = 'deliver') {
      blackholed = false;
      if (!listening) {
        // server.listen binds on the next tick (the IP literal's lookup is a nextTick), before
        // any connect the caller can start, so no caller sees a refused connect after heal().
        listen(port).catch((err: Error) => {
          listenError = err;
        });
      }
      for (const conn of [...conns]) {
        if (conn.state !== 'held') continue;
        if (mode === 'reset') {
          conn.state = 'hung';
          rst(conn.client);
          rst(conn.upstream);
        } else if (mode === 'hang') {
          conn.state = 'hung';
          conn.toClient.length = 0;
          conn.toUpstream.length = 0;
        } else {
          conn.state = 'pass';
          if (!conn.upstream) connectUpstream(conn);
          for (const item of conn.toUpstream.splice(0)) forward(conn, 'upstream', item);
          for (const item of conn.toClient.splice(0)) forward(conn, 'client', item);
          conn.client.resume();
          conn.upstream?.resume();
        }
      }
    },
    async refuse() {
      resetAll();
      if (!listening) return;
      listening = false;
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
    async close() {
      resetAll();
      if (listening) {
        listening = false;
        await new Promise<void>((resolve) => server.close(() => resolve()));
      }
      if (listenError) throw listenError;
    },
  };
}

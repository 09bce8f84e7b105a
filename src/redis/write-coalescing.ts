import type { Duplex } from 'node:stream';
import type { Redis } from 'ioredis';
import { isCluster, type RedisClient } from './redis-client.js';

/**
 * One socket write per event-loop turn for a Redis connection, however many commands the turn
 * issued.
 *
 * ioredis writes every command to its socket at once: one `write` system call each. A worker
 * issues its row's fence call from the callback of that row's HTTP answer, and the answers of
 * several rows arrive in one turn of the loop (one poll of the sockets), so each turn made
 * several small writes, each waking Redis for a few dozen bytes. Measured on the throughput
 * benchmark (bench/RESULTS.md, "The twentieth session"), those writes were 11 % of the worker's
 * busy time. Corking the socket at a turn's first write and uncorking it in the same turn's
 * check phase (`setImmediate`) sends them as one `writev`; the commands leave in the order they
 * were issued and no later than the end of the turn that issued them.
 *
 * Not ioredis's `enableAutoPipelining`, which groups a turn's commands too but holds a
 * connection's next group until the one before it is answered (built/autoPipelining.js,
 * `_runningAutoPipelines`): a wait of a whole round trip where Redis is far, and on loopback
 * the throughput benchmark fell with it (bench/RESULTS.md, "The nineteenth session").
 *
 * Every connection the client opens gets it: each (re)connect of a Redis, each node of a
 * Cluster as it joins. Idempotent.
 */
export function coalesceWrites(client: RedisClient): void {
  if (clients.has(client)) return;
  clients.add(client);
  if (isCluster(client)) {
    for (const node of client.nodes()) coalesceWrites(node);
    client.on('+node', (node: Redis) => coalesceWrites(node));
    return;
  }
  // ioredis makes a new socket on every connect and says 'connect' once it is connected.
  client.on('connect', () => corkEachTurn(client.stream));
  if (client.stream) corkEachTurn(client.stream);
}

const clients = new WeakSet<RedisClient>();
const corked = new WeakSet<Duplex>();

function corkEachTurn(stream: Duplex | undefined): void {
  if (!stream || corked.has(stream)) return;
  corked.add(stream);
  // ioredis calls `stream.write` itself and offers no hook: the one place every command passes.
  const write = stream.write.bind(stream) as (...args: unknown[]) => boolean;
  let held = false;
  const release = (): void => {
    held = false;
    stream.uncork();
  };
  stream.write = ((...args: unknown[]): boolean => {
    if (!held && !stream.destroyed) {
      held = true;
      stream.cork();
      setImmediate(release);
    }
    return write(...args);
  }) as Duplex['write'];
}

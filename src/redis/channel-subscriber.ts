import { Redis, type Cluster, type RedisOptions } from 'ioredis';
import { isCluster, type RedisClient } from './redis-client.js';

export interface ChannelSubscriberOptions {
  /** The channel to listen on (classic pub/sub: in a Cluster every node hears every publish). */
  channel: string;
  onMessage: () => void;
  /** A connection that failed or a SUBSCRIBE refused: the caller's fallback (a poll) covers it. */
  onError: (err: unknown) => void;
  /**
   * Cluster only: the wait before the `attempt`-th connection in a row that did not get ready,
   * each to the next node. Default min(200 ms × 2^attempt, 5 s), the Cluster client's own
   * reconnect delays (cluster-connection.ts).
   */
  retryDelayMs?: (attempt: number) => number;
}

const defaultDelay = (attempt: number): number => Math.min(200 * 2 ** Math.min(attempt, 6), 5000);

/**
 * Listens on one channel on a connection of its own (a subscribed connection can send nothing
 * else) and returns the closer. A single Redis: a duplicate of the client, which reconnects as
 * it does. A Cluster: not ioredis's own subscriber (`cluster.subscribe`), which on a lost
 * connection opens the next one at once, without a delay — with every node down a worker spent
 * a whole core on it and grew by 30 MB a second (1 GB in 30 s, 4 GB in 20 minutes), the cluster
 * client's own reconnects paced all the while. Here the next node is tried after a delay that
 * doubles, reset once a connection is ready.
 */
export function subscribeChannel(redis: RedisClient, options: ChannelSubscriberOptions): () => void {
  if (isCluster(redis)) return clusterSubscriber(redis, options);
  const sub = redis.duplicate();
  listen(sub, options);
  sub.subscribe(options.channel).catch(options.onError);
  return () => sub.disconnect();
}

function listen(sub: Redis | Cluster, options: ChannelSubscriberOptions): void {
  sub.on('error', options.onError);
  sub.on('message', (channel: string) => {
    if (channel === options.channel) options.onMessage();
  });
}

function clusterSubscriber(cluster: Cluster, options: ChannelSubscriberOptions): () => void {
  const delay = options.retryDelayMs ?? defaultDelay;
  let known: Array<{ host: string; port: number }> = [];
  let turn = 0;
  let attempt = 0;
  let closed = false;
  let current: Redis | undefined;
  let timer: NodeJS.Timeout | undefined;

  const nodes = (): Array<{ host: string; port: number }> => {
    // The pool empties while the cluster is down: keep the last nodes it had to try again.
    const live = cluster
      .nodes('all')
      .map((n) => ({ host: n.options.host ?? '127.0.0.1', port: n.options.port ?? 6379 }));
    if (live.length > 0) known = live;
    return known;
  };

  const connect = (): void => {
    timer = undefined;
    if (closed) return;
    const all = nodes();
    if (all.length === 0) return void retry();
    const node = all[turn++ % all.length]!;
    const nodeOptions: RedisOptions = cluster.options.redisOptions ?? {};
    const sub = new Redis({
      ...nodeOptions,
      host: node.host,
      port: node.port,
      connectionName: `${nodeOptions.connectionName ?? 'crm-sync'}:signals`,
      lazyConnect: true,
      // One node: no reconnect of its own; `end` moves on to the next node after the delay.
      retryStrategy: () => null,
    });
    current = sub;
    listen(sub, options);
    sub.once('ready', () => (attempt = 0));
    sub.once('end', () => {
      if (current === sub) retry();
    });
    sub.subscribe(options.channel).catch(options.onError);
  };

  const retry = (): void => {
    if (closed || timer) return;
    timer = setTimeout(connect, delay(attempt++));
    timer.unref();
  };

  connect();
  return () => {
    closed = true;
    clearTimeout(timer);
    current?.disconnect();
  };
}

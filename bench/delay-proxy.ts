/**
 * The delay proxy of bench/redis-latency.ts in a process of its own (so the benchmark's own work
 * cannot hold its timers up): `tsx bench/delay-proxy.ts <upstreamPort> <delayMs>` prints its port.
 * Loopback only (test/helpers/tcp-proxy.ts); stops on SIGTERM.
 */
import { startTcpProxy } from '../test/helpers/tcp-proxy.js';

const proxy = await startTcpProxy({ upstreamPort: Number(process.argv[2]), delayMs: Number(process.argv[3]) });
console.log(proxy.port);
process.on('SIGTERM', () => void proxy.close().then(() => process.exit(0)));

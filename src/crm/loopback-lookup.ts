import { lookup as systemLookup, type LookupAddress, type LookupOptions } from 'node:dns';
import type { LookupFunction } from 'node:net';

/**
 * RFC 6761 §6.3: `localhost` and every `*.localhost` name is loopback. glibc and macOS do
 * not all resolve `acme.localhost`, and the simulator tells workspaces apart by that
 * subdomain, so the client answers these names itself and asks the system for the rest.
 */
export function isLoopbackName(hostname: string): boolean {
  const h = hostname.toLowerCase().replace(/\.$/, '');
  return h === 'localhost' || h.endsWith('.localhost');
}

type LookupCallback = (err: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;

export const loopbackLookup: LookupFunction = (
  hostname: string,
  options: LookupOptions,
  callback: LookupCallback,
): void => {
  if (!isLoopbackName(hostname)) {
    if (options.all === true)
      systemLookup(hostname, { ...options, all: true }, (err, addresses) => callback(err, addresses));
    else systemLookup(hostname, { ...options, all: false }, (err, address, family) => callback(err, address, family));
    return;
  }
  // The simulator and local tools listen on IPv4 127.0.0.1; ::1 would miss them.
  const address: LookupAddress = { address: '127.0.0.1', family: 4 };
  // Answer asynchronously like the real resolver, so net's state machine sees the usual order.
  process.nextTick(() => {
    if (options.all === true) callback(null, [address]);
    else callback(null, address.address, address.family);
  });
};

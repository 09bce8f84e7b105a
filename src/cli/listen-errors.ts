import { CrmSyncError } from '../errors/index.js';

/**
 * A listener that could not bind, as one sentence (USAGE, exit 2) instead of "unexpected error"
 * and a stack: the port is someone else's, or the address is not this machine's. Anything else
 * is returned as it came. `what` names the listener ("the dashboard"), `portOption` the flag
 * that moves it.
 */
export function listenError(
  err: unknown,
  where: { what: string; host: string; port: number; portOption?: string },
): unknown {
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  const flag = where.portOption ?? '--port';
  if (code === 'EADDRINUSE') {
    return new CrmSyncError(
      'USAGE',
      `${where.what} cannot listen on ${where.host}:${where.port}: the port is already in use (another crm-sync?); pick another with ${flag}, or ${flag} 0 for any free one`,
      { cause: err },
    );
  }
  if (code === 'EADDRNOTAVAIL' || code === 'EACCES' || code === 'ENOTFOUND') {
    return new CrmSyncError(
      'USAGE',
      `${where.what} cannot listen on ${where.host}:${where.port} (${code}${code === 'EACCES' ? ': ports below 1024 need privileges' : code === 'EADDRNOTAVAIL' ? ': not an address of this machine' : ': unknown host'}); choose another --host or ${flag}`,
      { cause: err },
    );
  }
  return err;
}

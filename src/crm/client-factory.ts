import { getWorkspace, readApiKey, type Config } from '../config/index.js';
import { CrmClient } from './crm-client.js';
import type { Logger } from '../log/index.js';

/** An API client for a configured workspace; reads its key now (SECRET_MISSING names the source). */
export function createCrmClient(
  config: Config,
  workspace: string,
  logger: Logger,
  options: { maxSockets?: number } = {},
): CrmClient {
  const ws = getWorkspace(config, workspace);
  return new CrmClient({
    workspace: ws.name,
    baseUrl: ws.baseUrl,
    apiKey: readApiKey(ws),
    listVersion: ws.listVersion,
    timeoutMs: ws.requestTimeoutMs,
    logger,
    ...(options.maxSockets !== undefined ? { maxSockets: options.maxSockets } : {}),
  });
}

import { Secret } from '../src/config/index.js';
import { CrmClient } from '../src/crm/index.js';
import type { SimProcess } from './bench-lib.js';

/** Deal ids of the simulator's seeded workspace, paged through the real client. */
export async function dealIds(sim: SimProcess): Promise<string[]> {
  const client = new CrmClient({ workspace: 'acme', baseUrl: sim.baseUrl, apiKey: new Secret(sim.apiKey) });
  const ids: string[] = [];
  for await (const d of client.records('deals', { pageSize: 100 })) ids.push(d.id);
  client.close();
  return ids;
}

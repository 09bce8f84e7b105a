import { Secret } from '../src/config/index.js';
import { CrmClient } from '../src/crm/index.js';
import type { SimProcess } from './bench-lib.js';

/** Deal ids of one of the simulator's seeded workspaces (default acme), paged through the real client. */
export async function dealIds(sim: SimProcess, workspace = 'acme'): Promise<string[]> {
  const client = new CrmClient({ workspace, baseUrl: sim.baseUrlOf(workspace), apiKey: new Secret(sim.apiKey) });
  const ids: string[] = [];
  for await (const d of client.records('deals', { pageSize: 100 })) ids.push(d.id);
  client.close();
  return ids;
}

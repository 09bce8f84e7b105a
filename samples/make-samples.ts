/**
 * Writes the sample files from the simulator's seed data (seed 7, 200 records), so their ids
 * exist in the demo's simulated CRM. Some rows are wrong on purpose: the demo and the tests show
 * how each kind of problem is reported. Run: npx tsx samples/make-samples.ts
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startSimulator } from '../src/sim/index.js';

const dir = fileURLToPath(new URL('.', import.meta.url));
const sim = await startSimulator({ port: 0, workspaces: [{ name: 'acme', apiKeys: ['k'], records: 200, seed: 7 }] });
const ws = sim.workspace('acme');
const deals = [...ws.deals.values()];
const contacts = [...ws.contacts.values()];
const leads = [...ws.leads.values()];
const q = (v: string | number) => (/[",\n]/.test(String(v)) ? `"${String(v).replaceAll('"', '""')}"` : String(v));
const csvText = (rows: Array<Array<string | number>>) => rows.map((r) => r.map(q).join(',')).join('\n') + '\n';
const write = (name: string, text: string) => writeFileSync(join(dir, name), text);
const tag = (i: number) => ws.tags[i % ws.tags.length]!;
const stage = (i: number) => ws.stages[i % ws.stages.length]!;

// Deal updates as a spreadsheet export: human column names, mapped by deals-mapping.json.
const dealRows: Array<Array<string | number>> = [['Deal ID', 'Deal name', 'Amount (USD)', 'Stage', 'Pipeline', 'Tags', 'Notes']];
for (let i = 0; i < 36; i++) {
  const d = deals[i]!;
  const s = stage(i);
  dealRows.push([d.id, `${d.name}, renewal`, 1000 * (i + 1) + 0.5, s.id, s.pipelineId, `${tag(i).id};${tag(i + 3).id}`, i === 2 ? 'multi-line\nnote, quoted' : '']);
}
dealRows.push([deals[36]!.id, deals[36]!.name, '12,5k', stage(0).id, stage(0).pipelineId, '', 'amount is not a number']);
dealRows.push([deals[37]!.id, '', 5000, stage(1).id, stage(1).pipelineId, '', 'name missing: the API requires it']);
dealRows.push(['del_00000000000000000000', 'Ghost deal', 7000, stage(2).id, stage(2).pipelineId, '', 'no such deal: 404']);
dealRows.push([deals[38]!.id, deals[38]!.name, 9000, 'stg_retired', stage(0).pipelineId, '', 'unknown stage: the CRM rejects it']);
write('deals-update.csv', csvText(dealRows));
write(
  'deals-mapping.json',
  JSON.stringify(
    {
      columns: {
        'Deal ID': 'id',
        'Deal name': 'name',
        'Amount (USD)': { field: 'value', type: 'number' },
        Stage: 'stage_id',
        Pipeline: 'pipeline_id',
        Tags: { field: 'tag_ids', type: 'list', separator: ';' },
      },
      unmapped: 'ignore',
    },
    null,
    2,
  ) + '\n',
);

// New deals, columns named like the API fields (no mapping needed).
const createRows: Array<Array<string | number>> = [['name', 'value', 'status', 'owner_id', 'pipeline_id', 'stage_id', 'tag_ids']];
for (let i = 0; i < 10; i++) {
  const s = stage(i);
  createRows.push([`Sample Co ${i + 1} - Onboarding`, 2500 * (i + 1), i % 3 === 0 ? 'won' : 'in_progress', ws.owners[i % ws.owners.length]!.id, s.pipelineId, s.id, tag(i).id]);
}
createRows.push(['Sample Co 11 - Onboarding', 1000, 'pending', '', '', '', '']);
write('deals-create.csv', csvText(createRows));

// Contact updates as NDJSON.
const contactLines: string[] = [];
for (let i = 0; i < 24; i++) {
  const c = contacts[i]!;
  contactLines.push(JSON.stringify({ id: c.id, phone_number: `+1 415-555-${String(1000 + i)}`, company_id: ws.companies[i % ws.companies.length]!.id, tag_ids: [tag(i).id] }));
}
contactLines.push(JSON.stringify({ id: contacts[24]!.id, email: 'not-an-email' }));
contactLines.push(JSON.stringify({ id: 'con_00000000000000000000', name: 'Nobody' }));
write('contacts-update.ndjson', contactLines.join('\n') + '\n');

// Lead status changes as a JSON array.
const leadItems = leads.slice(0, 14).map((l, i) => ({ id: l.id, status: i % 2 ? 'converted' : 'archived', owner_id: ws.owners[i % ws.owners.length]!.id }));
leadItems.push({ id: leads[14]!.id, status: 'won', owner_id: ws.owners[0]!.id });
write('leads-update.json', JSON.stringify(leadItems, null, 2) + '\n');

// Invitations: one malformed address (invalid, never sent) and two the CRM refuses (bisected out).
const inviteRows: Array<Array<string | number>> = [['email', 'organization_role', 'send_invitation_email']];
for (let i = 0; i < 27; i++) inviteRows.push([`new.hire${i + 1}@acme-corp.example`, i < 3 ? 'Admin' : 'Standard', 'false']);
inviteRows.splice(8, 0, ['temp.worker@disposable.example', 'Standard', 'false']);
inviteRows.splice(20, 0, ['intern@disposable.example', 'Standard', 'false']);
inviteRows.push(['new.hire28@@acme-corp.example', 'Standard', 'false']);
write('team-invite.csv', csvText(inviteRows));

await sim.close();
process.stdout.write(`samples written to ${dir}\n`);

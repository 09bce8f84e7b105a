import type { CrmClient, OperationPayload } from '../crm/index.js';

type RowPayload = Exclude<OperationPayload, { op: 'team.invite' }>;

/** Makes the one API call a row job stands for; returns the id of the record written. */
export async function executeRow(client: CrmClient, payload: RowPayload): Promise<string> {
  switch (payload.op) {
    case 'deal.update':
      return (await client.updateDeal(payload.id, payload.fields)).id;
    case 'deal.create':
      return (await client.createDeal(payload.fields)).id;
    case 'lead.update':
      return (await client.updateLead(payload.id, payload.fields)).id;
    case 'contact.update':
      return (await client.updateContact(payload.id, payload.fields)).id;
  }
}

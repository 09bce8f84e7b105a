import type { CrmClient, DealCreateFields } from '../crm/index.js';
import type { RowPayload } from '../queue/index.js';

/**
 * Makes the one API call a queued row stands for; returns the id of the record written.
 * `createDeal` replaces the plain POST for deal.create (the duplicate-safe create).
 */
export async function executeRow(client: CrmClient, payload: RowPayload, createDeal?: (fields: DealCreateFields) => Promise<string>): Promise<string> {
  switch (payload.op) {
    case 'deal.update':
      return (await client.updateDeal(payload.id, payload.fields)).id;
    case 'deal.create':
      return createDeal ? createDeal(payload.fields) : (await client.createDeal(payload.fields)).id;
    case 'lead.update':
      return (await client.updateLead(payload.id, payload.fields)).id;
    case 'contact.update':
      return (await client.updateContact(payload.id, payload.fields)).id;
  }
}

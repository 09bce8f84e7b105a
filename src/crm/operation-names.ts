/**
 * The operations crm-sync performs. An operation name is also the BullMQ job name. Its own
 * module (no zod) so the CLI can offer them as choices without loading the payload schemas.
 */
export const OPERATIONS = ['deal.update', 'deal.create', 'lead.update', 'contact.update', 'team.invite'] as const;
export type Operation = (typeof OPERATIONS)[number];

import { fail, ok, type SimAnswer } from './answer.js';
import { isEmailAddress } from './email-check.js';
import type { WorkspaceState } from './sim-workspace.js';

/** Our reading of the unstated size limit of `emails`. */
export const MAX_EMAILS_PER_REQUEST = 100;

const KNOWN_FIELDS = new Set(['emails', 'organization_role', 'invited_by', 'send_invitation_email']);
function isEmail(value: unknown): value is string {
  return isEmailAddress(value);
}

/** Accept must name application/json (spec §4.5); wildcards do not count. */
function acceptsJson(accept: string | undefined): boolean {
  if (accept === undefined) return false;
  return accept.split(',').some((range) => range.split(';')[0]?.trim().toLowerCase() === 'application/json');
}

function validate(ws: WorkspaceState, body: unknown): string | null {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return 'body must be a JSON object';
  const b = body as Record<string, unknown>;
  const unknown = Object.keys(b).filter((k) => !KNOWN_FIELDS.has(k));
  if (unknown.length > 0) return `body: unknown field(s) ${unknown.join(', ')}`;
  const { emails, organization_role: role, invited_by: invitedBy, send_invitation_email: send } = b;
  if (!Array.isArray(emails) || emails.length === 0) return 'emails: must be a non-empty array of email addresses';
  if (emails.length > MAX_EMAILS_PER_REQUEST)
    return `emails: at most ${MAX_EMAILS_PER_REQUEST} per request (got ${emails.length})`;
  const bad = emails.filter((e) => !isEmail(e));
  if (bad.length > 0)
    return `Invalid email addresses: ${bad.map((e) => (typeof e === 'string' ? e : JSON.stringify(e))).join(', ')}`;
  const refused = (emails as string[]).filter((e) =>
    ws.blockedEmailDomains.has(e.slice(e.lastIndexOf('@') + 1).toLowerCase()),
  );
  if (refused.length > 0) return `Invalid email addresses: ${refused.join(', ')} (domain not allowed)`;
  if (role !== undefined && (typeof role !== 'string' || !ws.roles.has(role))) {
    return `organization_role: must be one of the workspace roles (${[...ws.roles].join(', ')})`;
  }
  if (invitedBy !== undefined && !isEmail(invitedBy)) return 'invited_by: must be a valid email address';
  if (send !== undefined && send !== 'true' && send !== 'false')
    return 'send_invitation_email: must be the string "true" or "false"';
  return null;
}

/** POST v2/team-members: all or nothing; an existing member is accepted again, not re-added. */
export function addTeamMembers(ws: WorkspaceState, accept: string | undefined, body: unknown): SimAnswer {
  if (!acceptsJson(accept)) return fail(406, 'Accept header must be application/json');
  const problem = validate(ws, body);
  if (problem !== null) return fail(422, problem);
  const b = body as {
    emails: string[];
    organization_role?: string;
    invited_by?: string;
    send_invitation_email?: string;
  };
  const role = b.organization_role ?? 'Standard';
  if (!ws.roles.has(role))
    return fail(422, `organization_role: the default role Standard is not defined in this workspace`);
  const invitedBy = b.invited_by ?? ws.latestAdmin();
  const addedAt = new Date().toISOString();
  const unique = new Map(b.emails.map((e) => [e.toLowerCase(), e]));
  for (const [key, email] of unique) {
    if (ws.teamMembers.has(key)) continue;
    ws.teamMembers.set(key, {
      email,
      role,
      invitedBy,
      invitationEmailSent: b.send_invitation_email !== 'false',
      addedAt,
    });
    ws.stats.writes.membersAdded++;
  }
  ws.stats.writes.teamMembers++;
  const n = unique.size;
  return ok(201, { message: `${n} ${n === 1 ? 'user' : 'users'} added to the workspace` }, true);
}

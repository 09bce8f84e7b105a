import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startSimulator, type Simulator, type SimWorkspace } from '../../src/sim/index.js';
import { client, errorOf } from './sim-fixture.js';

let sim: Simulator;
let ws: SimWorkspace;
let api: ReturnType<typeof client>;
let members0 = 0;

beforeAll(async () => {
  sim = await startSimulator({
    workspaces: [{ name: 'acme', apiKeys: ['k'], roles: ['Standard', 'Admin', 'Sales Rep'] }],
  });
  ws = sim.workspace('acme');
  api = client(sim, 'acme', 'k');
  members0 = ws.teamMembers.size;
});
afterAll(() => sim.close());
beforeEach(() => {
  // Keep only the seeded members so each case starts alike.
  for (const [key, m] of ws.teamMembers)
    if (m.invitedBy !== null || m.addedAt > '2024-01-02') ws.teamMembers.delete(key);
});

describe('POST v2/team-members', () => {
  it('adds members: 201 {message}, default role Standard, invitation sent, invited by the latest admin', async () => {
    const res = await api.post('v2/team-members', { emails: ['Ann@Example.com', 'bob@example.com'] });
    expect(res.status).toBe(201);
    expect(res.json).toEqual({ message: '2 users added to the workspace' });
    const ann = ws.teamMembers.get('ann@example.com');
    expect(ann).toMatchObject({ email: 'Ann@Example.com', role: 'Standard', invitationEmailSent: true });
    const admins = [...ws.teamMembers.values()].filter((m) => m.role === 'Admin');
    expect(ann?.invitedBy).toBe(admins.at(-1)?.email);
    expect(ws.teamMembers.size).toBe(members0 + 2);
  });

  it('honours organization_role, invited_by and send_invitation_email "false"', async () => {
    const res = await api.post('v2/team-members', {
      emails: ['carol@example.com'],
      organization_role: 'Sales Rep',
      invited_by: 'boss@example.com',
      send_invitation_email: 'false',
    });
    expect(res.status).toBe(201);
    expect(ws.teamMembers.get('carol@example.com')).toMatchObject({
      role: 'Sales Rep',
      invitedBy: 'boss@example.com',
      invitationEmailSent: false,
    });
  });

  it('an existing member is accepted again but not re-added', async () => {
    await api.post('v2/team-members', { emails: ['dan@example.com'], organization_role: 'Admin' });
    const size = ws.teamMembers.size;
    const res = await api.post('v2/team-members', { emails: ['DAN@example.com', 'dan@example.com'] });
    expect(res.status).toBe(201);
    expect(ws.teamMembers.size).toBe(size);
    expect(ws.teamMembers.get('dan@example.com')?.role).toBe('Admin');
  });

  it('406 without Accept: application/json', async () => {
    for (const accept of ['text/html', '*/*', '']) {
      const res = await api.post('v2/team-members', { emails: ['eve@example.com'] }, { accept });
      expect(res.status).toBe(406);
      expect(errorOf(res)).toMatch(/Accept/);
    }
    expect(
      (
        await api.post(
          'v2/team-members',
          { emails: ['eve@example.com'] },
          { accept: 'text/plain, application/json; q=0.9' },
        )
      ).status,
    ).toBe(201);
  });

  it.each([
    ['emails missing', {}, /emails/],
    ['emails empty', { emails: [] }, /emails/],
    ['emails not an array', { emails: 'a@example.com' }, /emails/],
    ['101 emails', { emails: Array.from({ length: 101 }, (_, i) => `u${i}@example.com`) }, /at most 100/],
    ['unknown role', { emails: ['f@example.com'], organization_role: 'Owner' }, /organization_role/],
    ['role not a string', { emails: ['f@example.com'], organization_role: 1 }, /organization_role/],
    ['bad invited_by', { emails: ['f@example.com'], invited_by: 'boss' }, /invited_by/],
    [
      'boolean send_invitation_email',
      { emails: ['f@example.com'], send_invitation_email: false },
      /send_invitation_email/,
    ],
    [
      'other string send_invitation_email',
      { emails: ['f@example.com'], send_invitation_email: 'yes' },
      /send_invitation_email/,
    ],
    ['unknown field', { emails: ['f@example.com'], team: 'x' }, /unknown field.*team/],
    ['wrapped body', { team_member: { emails: ['f@example.com'] } }, /unknown field|emails/],
  ])('422 for %s, nobody added', async (_case, body, message) => {
    const size = ws.teamMembers.size;
    const res = await api.post('v2/team-members', body);
    expect(res.status).toBe(422);
    expect(errorOf(res)).toMatch(message);
    expect(ws.teamMembers.size).toBe(size);
  });

  it('422 naming every bad email; the good ones in that request are not added', async () => {
    const size = ws.teamMembers.size;
    const res = await api.post('v2/team-members', {
      emails: ['good@example.com', 'a@', 'b', 'also.good@example.com', 42],
    });
    expect(res.status).toBe(422);
    expect(errorOf(res)).toBe('Invalid email addresses: a@, b, 42');
    expect(ws.teamMembers.size).toBe(size);
    expect(ws.teamMembers.has('good@example.com')).toBe(false);
  });

  it('counts applied requests and new members', async () => {
    ws.resetStats();
    await api.post('v2/team-members', { emails: ['g1@example.com', 'g2@example.com'] });
    await api.post('v2/team-members', { emails: ['g1@example.com'] });
    await api.post('v2/team-members', { emails: ['bad'] });
    expect(ws.stats.writes.teamMembers).toBe(2);
    expect(ws.stats.writes.membersAdded).toBe(2);
  });
});

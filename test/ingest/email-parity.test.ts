import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { emailProblem, isValidEmail } from '../../src/crm/index.js';
import { isEmailAddress } from '../../src/sim/email-check.js';
import { startSimulator, type Simulator } from '../../src/sim/index.js';
import { Prng } from '../../src/sim/prng.js';
import { client } from '../sim/sim-fixture.js';

/**
 * The client's email rule and the simulator's are written apart (so one mistake cannot hide
 * in both); here they must agree, and the simulator must answer 422 over HTTP to what the
 * client refuses to send.
 */
const REFUSED = [
  'x@bad-.example',
  'x@-bad.example',
  `x@${'a'.repeat(64)}.example`,
  'x@localhost',
  'x@a.b1',
  'x@a..example',
  '.x@a.example',
  'x.@a.example',
  'x..y@a.example',
  `${'l'.repeat(65)}@a.example`,
  'x y@a.example',
  'x@y@a.example',
  '@a.example',
  'x@',
  'x@.example',
  `x@${'abc.'.repeat(63)}example`,
];
const ACCEPTED = [
  'x@a.example',
  'first.last+tag@sub.domain.example',
  `x@${'a'.repeat(63)}.example`,
  "o'neil@x-y.co",
  'x@xn--bcher-kva.example',
  'A_B@C.IO',
];

let sim: Simulator;
beforeAll(async () => {
  sim = await startSimulator({ workspaces: [{ name: 'acme', apiKeys: ['k'], records: 5, seed: 3 }] });
});
afterAll(() => sim.close());

describe('email validators (client and simulator, written apart)', () => {
  it('agree on hand-picked addresses', () => {
    for (const email of REFUSED) {
      expect(emailProblem(email), email).toBeDefined();
      expect(isEmailAddress(email), email).toBe(false);
    }
    for (const email of ACCEPTED) {
      expect(emailProblem(email), email).toBeUndefined();
      expect(isEmailAddress(email), email).toBe(true);
    }
  });

  it('agree on 5,000 random near-addresses', () => {
    const prng = new Prng(11);
    const pieces = [
      'a',
      'Z',
      '9',
      '-',
      '.',
      '@',
      '_',
      '+',
      ' ',
      'é',
      'xn--',
      'example',
      'co',
      'a'.repeat(63),
      '-x',
      'x-',
    ];
    let valid = 0;
    for (let i = 0; i < 5000; i++) {
      const local = Array.from(
        { length: 1 + Math.floor(prng.next() * 3) },
        () => pieces[Math.floor(prng.next() * pieces.length)],
      ).join('');
      const domain = Array.from(
        { length: 1 + Math.floor(prng.next() * 4) },
        () => pieces[Math.floor(prng.next() * pieces.length)],
      ).join('.');
      const email = `${local}@${domain}`;
      expect(isEmailAddress(email), email).toBe(isValidEmail(email));
      if (isValidEmail(email)) valid++;
    }
    // Both outcomes were exercised.
    expect(valid).toBeGreaterThan(50);
    expect(valid).toBeLessThan(4950);
  });

  it('the simulator answers 422 to an address the client must never send', async () => {
    const ws = sim.workspace('acme');
    const api = client(sim, 'acme', 'k');
    const id = [...ws.contacts.keys()][0]!;
    const before = ws.contacts.get(id)!.email;
    const contact = await api.patch(`v2/contacts/${id}`, { contact: { email: 'x@bad-.example' } });
    expect(contact.status).toBe(422);
    expect(ws.contacts.get(id)!.email).toBe(before);
    const invite = await api.post('v2/team-members', { emails: [`x@${'a'.repeat(64)}.example`] });
    expect(invite.status).toBe(422);
    const fine = await api.patch(`v2/contacts/${id}`, { contact: { email: 'fine@good-host.example' } });
    expect(fine.status).toBe(200);
  });
});

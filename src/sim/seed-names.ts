/** Word pools for realistic-looking seed data. */

export const FIRST_NAMES = [
  'Ada', 'Alan', 'Amara', 'Anna', 'Arjun', 'Beatriz', 'Ben', 'Carlos', 'Chen', 'Chloe', 'Daniel', 'Dara',
  'Elena', 'Emeka', 'Emma', 'Fatima', 'Felix', 'Grace', 'Hana', 'Hugo', 'Ines', 'Isaac', 'Jamal', 'Jana',
  'Jonas', 'Julia', 'Kai', 'Kenji', 'Lara', 'Leo', 'Lina', 'Lucas', 'Maya', 'Mateo', 'Mei', 'Mia', 'Nadia',
  'Noah', 'Nora', 'Olga', 'Omar', 'Priya', 'Rafael', 'Rosa', 'Sam', 'Sara', 'Sofia', 'Tariq', 'Theo', 'Uma',
  'Victor', 'Wen', 'Yara', 'Yusuf', 'Zoe', 'Zainab', 'Marta', 'Pablo', 'Ingrid', 'Oscar',
] as const;

export const LAST_NAMES = [
  'Adams', 'Alvarez', 'Andersen', 'Baker', 'Bauer', 'Bianchi', 'Brown', 'Costa', 'Cruz', 'Dubois', 'Evans',
  'Fischer', 'Garcia', 'Gupta', 'Hansen', 'Hughes', 'Ito', 'Jansen', 'Kim', 'Kowalski', 'Larsen', 'Lee',
  'Lopez', 'Martin', 'Meyer', 'Moreau', 'Murphy', 'Nakamura', 'Nguyen', 'Novak', 'Okafor', 'Olsen',
  'Patel', 'Perez', 'Petrov', 'Quinn', 'Rossi', 'Santos', 'Schmidt', 'Silva', 'Singh', 'Smith', 'Suzuki',
  'Tanaka', 'Taylor', 'Torres', 'Walker', 'Wang', 'Weber', 'Wilson', 'Yamamoto', 'Zhang', 'Ibrahim',
  'Kaur', 'Lindqvist', 'Mensah', 'Romero', 'Sato', 'Varga', 'Owusu',
] as const;

const COMPANY_STEMS = [
  'Acme', 'Globex', 'Initech', 'Umbrella', 'Stark', 'Wayne', 'Hooli', 'Vandelay', 'Soylent', 'Tyrell',
  'Cyberdyne', 'Wonka', 'Gringotts', 'Oscorp', 'Aperture', 'Monarch', 'Nakatomi', 'Pied Piper', 'Dunder',
  'Sterling', 'Blue Sun', 'Massive', 'Bluth', 'Prestige', 'Gekko',
] as const;
const COMPANY_SUFFIXES = ['Corp', 'Labs', 'Industries', 'Group', 'Systems', 'Logistics', 'Foods', 'Health'] as const;

/** 50 distinct company names: each stem with two different suffixes. */
export const COMPANY_NAMES: readonly string[] = COMPANY_STEMS.flatMap((stem, i) => [
  `${stem} ${COMPANY_SUFFIXES[i % COMPANY_SUFFIXES.length] ?? 'Corp'}`,
  `${stem} ${COMPANY_SUFFIXES[(i + 3) % COMPANY_SUFFIXES.length] ?? 'Group'}`,
]);

export const DEAL_PRODUCTS = [
  'Annual subscription', 'Pilot project', 'Seat expansion', 'Enterprise license', 'Support renewal',
  'Onboarding package', 'Data migration', 'Premium upgrade', 'Consulting retainer', 'Multi-year renewal',
  'Training workshop', 'API add-on', 'Security review', 'Integration bundle', 'Regional rollout',
] as const;

export const TAGS: ReadonlyArray<{ name: string; style: string }> = [
  { name: 'VIP', style: 'gold' },
  { name: 'Hot', style: 'red' },
  { name: 'Cold', style: 'blue' },
  { name: 'Newsletter', style: 'green' },
  { name: 'Partner', style: 'purple' },
  { name: 'Referral', style: 'teal' },
  { name: 'Trade show', style: 'orange' },
  { name: 'Inbound', style: 'cyan' },
  { name: 'Outbound', style: 'gray' },
  { name: 'Churn risk', style: 'pink' },
  { name: 'Upsell', style: 'lime' },
  { name: 'Enterprise', style: 'indigo' },
];

export const PIPELINES: ReadonlyArray<{ name: string; stages: readonly string[] }> = [
  { name: 'Sales', stages: ['Qualification', 'Discovery', 'Proposal', 'Negotiation', 'Closing'] },
  { name: 'Partnerships', stages: ['Introduction', 'Evaluation', 'Pilot', 'Contract', 'Launch'] },
];

export const FREEMAIL_DOMAINS = ['example.com', 'example.org', 'example.net'] as const;

export const CURRENCIES = ['USD', 'USD', 'USD', 'USD', 'USD', 'USD', 'USD', 'USD', 'EUR', 'GBP'] as const;

export function slug(text: string): string {
  return text.toLowerCase().replace(/[^a-z0-9]+/g, '');
}

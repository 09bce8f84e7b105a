// `npm test`: the static checks (scripts/check.js: types, lint, format) and the suite (vitest
// run) side by side. One after the other they took 36 s + 323 s on this 2-core machine under
// Node 20 (CI: 361 s, past the six minutes the suite may take): the suite leaves part of the two
// cores idle while it waits (simulated CRM latency, rate windows, child processes), and the
// checks fill it — at a lower priority (nice 10), so that they take only what the suite leaves:
// at the same priority they loaded its first 40 s, and a CLI's list pages bunched 11 into a
// 1-s window of a 10/s limit (test/rate/command-budget.test.ts; the margin widens only after a
// stall is seen). The checks' report is printed whole when they end; the exit code is the
// checks' failure if they failed, else the suite's. Arguments go to vitest.
import { join } from 'node:path';
import { bin, runNode } from './check.js';

const checks = runNode([join(import.meta.dirname, 'check.js')], { nice: 10 }).then((r) => {
  process.stdout.write(r.text);
  return r;
});
const suite = runNode([bin('vitest', 'vitest'), 'run', ...process.argv.slice(2)], { stdio: 'inherit' });
const [c, s] = await Promise.all([checks, suite]);
if (c.code !== 0) process.stdout.write('[check] the static checks failed (above): npm test fails\n');
process.exit(c.code !== 0 ? c.code : s.code);

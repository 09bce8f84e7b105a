// `npm test`: the static checks (scripts/check.js: types, lint, format) and the suite (vitest
// run) side by side. One after the other they took 36 s + 323 s on this 2-core machine under
// Node 20 (CI: 361 s, past the six minutes the suite may take): the suite leaves part of the two
// cores idle while it waits (simulated CRM latency, rate windows, child processes), and the
// checks fill it — at a lower priority (nice 10), so that they take only what the suite leaves:
// at the same priority they loaded its first 40 s, and a CLI's list pages bunched 11 into a
// 1-s window of a 10/s limit (test/rate/command-budget.test.ts; the margin widens only after a
// stall is seen). The checks' report is printed whole when they end; the exit code is the
// checks' failure if they failed, else the suite's. Arguments go to vitest.
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import { setPriority } from 'node:os';
import { dirname, join } from 'node:path';

const require = createRequire(import.meta.url);
const manifest = require.resolve('vitest/package.json');
const entry = require(manifest).bin;
const vitestBin = join(dirname(manifest), typeof entry === 'string' ? entry : entry.vitest);

function run(args, stdio, nice = 0) {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, args, { stdio });
    if (nice !== 0 && child.pid !== undefined) {
      try {
        setPriority(child.pid, nice);
      } catch {
        // Not allowed here: the checks run at the suite's priority.
      }
    }
    const out = [];
    child.stdout?.on('data', (c) => out.push(c));
    child.stderr?.on('data', (c) => out.push(c));
    child.on('error', (err) => resolve({ code: 1, text: `${err.message}\n` }));
    child.on('close', (code, signal) =>
      resolve({ code: code ?? (signal ? 1 : 0), text: Buffer.concat(out).toString() }),
    );
  });
}

const checks = run([join(import.meta.dirname, 'check.js')], ['ignore', 'pipe', 'pipe'], 10).then((r) => {
  process.stdout.write(r.text);
  return r;
});
const suite = run([vitestBin, 'run', ...process.argv.slice(2)], 'inherit');
const [c, s] = await Promise.all([checks, suite]);
if (c.code !== 0) process.stdout.write('[check] the static checks failed (above): npm test fails\n');
process.exit(c.code !== 0 ? c.code : s.code);

// The static checks of `npm test` — types, lint, format — side by side: one after the other they
// took 47 s on this 2-core machine under Node 20 (tsc 11 s, eslint 27 s, prettier 9 s), side by
// side 39 s. Each one's output is printed whole when it ends, so the three never interleave; the
// exit code is the first failure's, and every check runs to its end whatever another found, so
// one run shows all that is wrong.
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

const require = createRequire(import.meta.url);
/** A package's command line entry, run with this Node (no shell, no .bin shims). */
function bin(pkg, name) {
  const manifest = require.resolve(`${pkg}/package.json`);
  const entry = require(manifest).bin;
  return join(dirname(manifest), typeof entry === 'string' ? entry : entry[name]);
}

const CHECKS = [
  ['types', bin('typescript', 'tsc'), ['--noEmit', '-p', '.']],
  ['lint', bin('eslint', 'eslint'), ['.']],
  ['format', bin('prettier', 'prettier'), ['--check', '.']],
];

function run([name, script, args]) {
  return new Promise((resolve) => {
    const started = Date.now();
    const child = spawn(process.execPath, [script, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    const out = [];
    child.stdout.on('data', (c) => out.push(c));
    child.stderr.on('data', (c) => out.push(c));
    child.on('error', (err) => resolve({ name, code: 1, text: `${err.message}\n`, ms: Date.now() - started }));
    child.on('close', (code, signal) =>
      resolve({ name, code: code ?? (signal ? 1 : 0), text: Buffer.concat(out).toString(), ms: Date.now() - started }),
    );
  });
}

let failed = 0;
for (const r of await Promise.all(CHECKS.map(run))) {
  const seconds = (r.ms / 1000).toFixed(1);
  process.stdout.write(`[check] ${r.name}: ${r.code === 0 ? 'ok' : `failed (exit ${r.code})`} in ${seconds} s\n`);
  if (r.text.trim() !== '') process.stdout.write(r.text.endsWith('\n') ? r.text : `${r.text}\n`);
  if (r.code !== 0 && failed === 0) failed = r.code;
}
process.exit(failed);

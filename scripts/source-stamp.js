// The one definition of "which sources a build was made from", shared by scripts/build.js (which
// writes it to dist/.build-stamp) and bin/crm-sync.js (which runs dist/ only when it matches).
// Plain JavaScript and node: built-ins only: the bin reads it on every start, before tsx exists,
// and it must cost a few milliseconds (src/ is ~200 files, ~1.5 MB).
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

/** Where the build writes the stamp, relative to the package root. */
export const STAMP_FILE = 'dist/.build-stamp';

/** Every file under `dir`, as paths relative to `root` with `/` separators. */
function filesUnder(root, dir) {
  const out = [];
  for (const entry of readdirSync(join(root, dir), { withFileTypes: true })) {
    const rel = `${dir}/${entry.name}`;
    if (entry.isDirectory()) out.push(...filesUnder(root, rel));
    else if (entry.isFile()) out.push(rel);
  }
  return out;
}

/**
 * sha1 over every file under src/, every tsconfig*.json, the lockfile and the build script
 * (sorted relative path, then content) and package.json's version: what the compiled dist/
 * depends on — the lockfile since dist/bundle/ holds the dependencies' code. Changes to anything
 * else (tests, docs) do not make a build stale.
 */
export function sourceStamp(root) {
  const hash = createHash('sha1');
  const configs = readdirSync(root).filter((name) => /^tsconfig.*\.json$|^package-lock\.json$/.test(name));
  const build = existsSync(join(root, 'scripts', 'build.js')) ? ['scripts/build.js'] : [];
  for (const rel of [...filesUnder(root, 'src'), ...configs, ...build].sort()) {
    hash.update(`${rel}\0`);
    hash.update(readFileSync(join(root, rel)));
    hash.update('\0');
  }
  const { version } = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
  hash.update(`version\0${version}`);
  return hash.digest('hex');
}

/** The stamp the last build wrote, or undefined when there is none (never built, or built before stamps). */
export function builtStamp(root) {
  try {
    return readFileSync(join(root, STAMP_FILE), 'utf8').trim();
  } catch {
    return undefined;
  }
}

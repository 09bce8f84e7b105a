#!/usr/bin/env node
// In a source checkout run the TypeScript directly (tsx); in a built image (no src/) run dist/.
import { existsSync } from 'node:fs';

const src = new URL('../src/cli.ts', import.meta.url);
if (existsSync(src)) {
  const { register } = await import('tsx/esm/api');
  register();
  await import(src.href);
} else {
  await import(new URL('../dist/cli.js', import.meta.url).href);
}

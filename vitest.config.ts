import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Integration tests share one Redis and spawn worker processes; two cores do not
    // gain from more parallel files than this, and fewer collisions make failures readable.
    fileParallelism: true,
    maxWorkers: 2,
    testTimeout: 30_000,
    hookTimeout: 30_000,
    // The slowest-files table ends every run (CI's log included), so a file that grows slow shows.
    reporters: ['default', './test/helpers/slowest-files-reporter.ts'],
  },
});

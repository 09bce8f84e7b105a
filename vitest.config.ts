import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Four files at a time on two cores: the suite mostly waits (on simulated CRM latency, rate
    // windows, settle times, child processes starting), not computes. Measured with two files at
    // a time, the whole run kept 0.64 of one core busy (382 s user + 52 s system in 11 min 19 s
    // of wall time), so two more files fit. Every file already has its own key prefix, ports and
    // private redis-servers, as it must with any parallelism.
    fileParallelism: true,
    maxWorkers: 4,
    testTimeout: 30_000,
    hookTimeout: 30_000,
    // The slowest-files table ends every run (CI's log included), so a file that grows slow shows.
    reporters: ['default', './test/helpers/slowest-files-reporter.ts'],
  },
});

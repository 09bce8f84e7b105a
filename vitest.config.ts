import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Four files at a time on two cores: the suite mostly waits (on simulated CRM latency, rate
    // windows, settle times, child processes starting), not computes. Measured with two files at
    // a time, the whole run kept 0.64 of one core busy (382 s user + 52 s system in 11 min 19 s
    // of wall time), so two more files fit. Every file already has its own key prefix, ports and
    // private redis-servers, as it must with any parallelism. Six at a time was tried on a machine
    // shared with other work (149 files): 623 s of wall time against 732 s at four, 105 % of one
    // core against 87 %, but the learned-rate test (test/pipeline/learned-rate.test.ts) learned a
    // ceiling of 63/s against its bound of 40 under that load, so four stays. Long files are split
    // instead (redis-loss, partition, create-doubt, crash-recovery, change-control-cli), so that no
    // one file holds the run's end.
    fileParallelism: true,
    maxWorkers: 4,
    testTimeout: 30_000,
    hookTimeout: 30_000,
    // The slowest-files table ends every run (CI's log included), so a file that grows slow shows.
    reporters: ['default', './test/helpers/slowest-files-reporter.ts'],
  },
});

import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Six files at a time on two cores: the suite mostly waits (on simulated CRM latency, rate
    // windows, settle times, child processes starting), not computes. Every file has its own key
    // prefix, ports and private redis-servers, as it must with any parallelism. Long files are
    // split (redis-loss, partition, create-doubt, crash-recovery, change-control-cli), so that no
    // one file holds the run's end.
    //
    // Files share a worker's module cache (isolate: false): with a fresh module graph per file,
    // importing src/ cost 118-130 s of the run's CPU (vitest's "import" figure), as much as a
    // third of what the two cores had. Nothing a test file leaves behind is read by another: env
    // variables are named per file, harnesses close what they open, the one fake clock (Date, in
    // test/runs/row-fence.test.ts) is put back in the same test. Measured on this machine, quiet,
    // 153 files: isolated, four at a time, Node 24: vitest 407 s (npm test 7 min 20 s); shared,
    // four: 329 s; shared, five: 274 s on Node 24 and 318 s on Node 20 (npm test 311 s and 363 s
    // in CI: Node 20 was over six minutes); shared, six, Node 20: 302 s. At six, on a machine
    // loaded by other work too, the learned-rate test (test/pipeline/learned-rate.test.ts) once
    // learned 63/s against its bound of 40: a machine busier than CI's.
    fileParallelism: true,
    isolate: false,
    maxWorkers: 6,
    testTimeout: 30_000,
    hookTimeout: 30_000,
    // The slowest-files table ends every run (CI's log included), so a file that grows slow shows.
    reporters: ['default', './test/helpers/slowest-files-reporter.ts'],
  },
});

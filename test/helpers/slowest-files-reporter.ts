import type { Reporter, TestModule } from 'vitest/node';

/**
 * Prints the slowest test files at the end of a run, next to vitest's default reporter, so CI
 * logs show where the suite's minutes go (the default reporter prints a file's time only as it
 * finishes, interleaved with everything else, and not at all for files that pass quietly).
 */
export default class SlowestFilesReporter implements Reporter {
  private readonly count: number;

  // vitest constructs a reporter named by path with its options object (`['path', { count }]`).
  constructor(options: { count?: number } = {}) {
    this.count = options.count ?? 20;
  }

  onTestRunEnd(testModules: ReadonlyArray<TestModule>): void {
    const rows = testModules
      .map((m) => ({ file: m.relativeModuleId, ms: fileTime(m), state: m.state() }))
      .sort((a, b) => b.ms - a.ms);
    const total = rows.reduce((sum, r) => sum + r.ms, 0);
    const lines = rows
      .slice(0, this.count)
      .map(
        (r) => `  ${(r.ms / 1000).toFixed(1).padStart(7)} s  ${r.file}${r.state === 'passed' ? '' : ` (${r.state})`}`,
      );
    process.stdout.write(
      `\nSlowest ${Math.min(this.count, rows.length)} of ${rows.length} test files ` +
        `(sum of file times ${(total / 1000).toFixed(1)} s; files run in parallel, so the wall time is less):\n${lines.join('\n')}\n`,
    );
  }
}

// A file's share of the wall time: importing it (collect) and its setup files, plus its tests
// and hooks; the environment and runner preparation are vitest's own and the same for all.
function fileTime(m: TestModule): number {
  const d = m.diagnostic();
  return d.collectDuration + d.setupDuration + d.duration;
}

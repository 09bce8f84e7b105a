import { spawn, type ChildProcess } from 'node:child_process';

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** A `crm-sync` child process still running: what it printed so far, and its exit. */
export interface RunningCli {
  child: ChildProcess;
  readonly stdout: string;
  readonly stderr: string;
  exited: Promise<number | null>;
}

/** Starts `crm-sync` as a user would (a child process) and keeps what it prints; `input` is piped to its stdin. */
export function startCli(args: string[], env: NodeJS.ProcessEnv, input?: string): RunningCli {
  const child = spawn(process.execPath, ['bin/crm-sync.js', ...args], {
    env,
    stdio: [input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'],
  });
  if (input !== undefined) child.stdin?.end(input);
  let stdout = '';
  let stderr = '';
  child.stdout?.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return {
    child,
    get stdout() {
      return stdout;
    },
    get stderr() {
      return stderr;
    },
    exited,
  };
}

/** Runs `crm-sync` to its end, with a time limit. */
export async function runCli(
  args: string[],
  env: NodeJS.ProcessEnv,
  timeoutMs = 60_000,
  input?: string,
): Promise<CliResult> {
  const cli = startCli(args, env, input);
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      cli.child.kill('SIGKILL');
      reject(new Error(`crm-sync ${args.join(' ')} did not finish in ${timeoutMs} ms\n${cli.stderr}`));
    }, timeoutMs);
  });
  try {
    const code = await Promise.race([cli.exited, late]);
    return { code, stdout: cli.stdout, stderr: cli.stderr };
  } finally {
    clearTimeout(timer);
  }
}

/** What a CLI test needs of its harness (read when called: the harness starts in `beforeAll`). */
interface CliHarness {
  configPath: string;
  env: NodeJS.ProcessEnv;
}

/** `crm-sync --config <harness's> --log-level warn …` as CI runs it (no TTY, `CI=true`). */
export function harnessArgs(h: CliHarness, args: string[]): { args: string[]; env: NodeJS.ProcessEnv } {
  return { args: ['--config', h.configPath, '--log-level', 'warn', ...args], env: { ...h.env, CI: 'true' } };
}

/** A `cli(args)` for a test file whose harness `harness()` returns once started. */
export function cliFor(
  harness: () => CliHarness,
): (args: string[], more?: { input?: string; env?: NodeJS.ProcessEnv; timeoutMs?: number }) => Promise<CliResult> {
  return (args, more = {}) => {
    const run = harnessArgs(harness(), args);
    return runCli(run.args, { ...run.env, ...more.env }, more.timeoutMs, more.input);
  };
}

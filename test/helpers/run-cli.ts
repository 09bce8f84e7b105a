import { spawn } from 'node:child_process';

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs `crm-sync` as a user would (a child process), with a time limit; `input` is piped to its stdin. */
export function runCli(args: string[], env: NodeJS.ProcessEnv, timeoutMs = 60_000, input?: string): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['bin/crm-sync.js', ...args], {
      env,
      stdio: [input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'],
    });
    if (input !== undefined) child.stdin?.end(input);
    let stdout = '';
    let stderr = '';
    child.stdout?.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr?.on('data', (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`crm-sync ${args.join(' ')} did not finish in ${timeoutMs} ms\n${stderr}`));
    }, timeoutMs);
    child.once('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

import { spawn, type ChildProcess } from 'node:child_process';

export interface SimProcess {
  child: ChildProcess;
  /** What it printed on stdout until it was ready. */
  out: string;
  port: number;
}

/** `crm-sync sim --port 0 …` as a child process, resolved once it prints its curl example. */
export async function startSimProcess(args: string[], env: NodeJS.ProcessEnv = process.env): Promise<SimProcess> {
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', 'src/cli.ts', 'sim', '--port', '0', '--log-level', 'silent', ...args],
    {
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let out = '';
  child.stdout.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr.resume();
  const deadline = Date.now() + 20_000;
  while (!out.includes('curl ')) {
    if (child.exitCode !== null) throw new Error(`sim exited early with ${child.exitCode}`);
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`sim did not start within 20 s; it printed: ${out}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  return { child, out, port: Number(/127\.0\.0\.1:(\d+)/.exec(out)?.[1]) };
}

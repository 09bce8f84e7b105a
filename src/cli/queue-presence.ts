import { whyRowsWait, type WaitReason } from '../queue/index.js';
import type { RunStore } from '../runs/index.js';

/**
 * While a run is followed (`import --wait`, `runs retry --wait`), says on stderr what keeps its
 * rows waiting — no worker serving the workspace's queue, an operator's pause, the circuit
 * breaker holding it — when that changes, and once more when it clears. Without it a run with
 * no worker shows "0 rows/s" forever without a hint.
 */
export class QueuePresenceWatch {
  #said = '';

  constructor(
    private readonly store: RunStore,
    private readonly workspace: string,
  ) {}

  /** Looks once; answers the line to print, if what holds the rows changed. */
  async look(): Promise<string | undefined> {
    const ws = this.workspace;
    const now = (await whyRowsWait(this.store, ws)).map((why) => words(ws, why)).join('\n');
    if (now === this.#said) return undefined;
    const before = this.#said;
    this.#said = now;
    if (now === '') return before === '' ? undefined : `workspace ${ws}: rows are being taken again`;
    return now;
  }
}

/** One reason in plain words, with the command that lifts it. */
function words(ws: string, why: WaitReason): string {
  switch (why.kind) {
    case 'blocked':
      return `workspace ${ws} is blocked: ${why.reason}`;
    case 'paused':
      return `workspace ${ws} is ${why.reason}; lift it with: crm-sync workspace resume -w ${ws}`;
    case 'unreachable':
      return `workspace ${ws} is held: ${why.reason}`;
    case 'no-worker':
      return (
        `no worker serves workspace ${ws}'s queue: its rows wait until one starts. ` +
        `Start one with "crm-sync worker -w ${ws}", or run this command with --work.`
      );
  }
}

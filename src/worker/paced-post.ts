import type { TokenWait } from '../rate/index.js';

/**
 * A create's or an invite's token, taken before the steps that decide whether its POST goes at
 * all (the write fence's call, a planned create's drift check, an invite batch's lock check).
 * Those steps are Redis round trips, so with Redis far the POST leaves well after its send
 * time: the request tells the budget when it really left (TokenWait.sent, through the client's
 * onWire), as an update's does, and a late one's send-log entry moves there. When no POST was
 * tried on the token after all (the deal exists, an identical create holds it, the row has its
 * result, the lock is gone), `settle` gives its send time back to the budget.
 */
export class PacedPost {
  #tried = false;

  /** `take`: a fresh token from the same budget, for renew. */
  constructor(
    private wait: TokenWait,
    private readonly take: () => Promise<TokenWait>,
  ) {}

  /**
   * A token held through a lookup (a create in doubt, proved not applied) is stale by its end:
   * sent on, its POST would count in a window the log no longer holds it in. It goes back, and
   * a fresh one is waited for.
   */
  async renew(): Promise<void> {
    this.wait.cancel();
    this.wait = await this.take();
  }

  /** The POST is being tried now: the call options' `onWire` for it. */
  tried(): (at: number) => void {
    this.#tried = true;
    return (at) => this.wait.sent(at);
  }

  /** Called once whatever came of the row: the token goes back unless a POST was tried on it. */
  settle(): void {
    if (!this.#tried) this.wait.cancel();
  }
}

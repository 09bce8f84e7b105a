/** What a route decided: the status and body to send, and whether a write was applied. */
export interface SimAnswer {
  status: number;
  body: unknown;
  /** True when state changed: a commit-then-drop fault may then swallow the answer. */
  applied: boolean;
}

export const AUTH_ERROR = 'Could not authenticate, invalid API Key';

export function fail(status: number, error: string): SimAnswer {
  return { status, body: { error }, applied: false };
}

export function ok(status: number, body: unknown, applied: boolean): SimAnswer {
  return { status, body, applied };
}

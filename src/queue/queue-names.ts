import { hashTag } from '../keys/index.js';

/**
 * One queue per workspace: its API key is what the CRM limits, pauses and refuses. The name is
 * the workspace's hash tag, so BullMQ's keys of the queue share the slot of the workspace's run
 * and fence keys (src/keys).
 */
export function queueName(workspace: string): string {
  return hashTag(workspace);
}

/** The workspace a queue belongs to (the inverse of queueName). */
export function workspaceOfQueue(name: string): string {
  return name.startsWith('{') && name.endsWith('}') ? name.slice(1, -1) : name;
}

/**
 * `${runId}-${row}`: re-adding the same row of the same run is a no-op (BullMQ dedupes on id,
 * and forbids ':' in custom ids). A retry is a new generation with a new id, because the
 * first job may still sit in the completed set.
 */
export function rowJobId(runId: string, row: number, generation = 0): string {
  return generation === 0 ? `${runId}-${row}` : `${runId}-${row}-r${generation}`;
}

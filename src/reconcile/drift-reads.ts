/*
 * How apply's drift check spends list requests (src/worker/drift-check.ts), shared with the
 * plan's prediction of them (src/plans/apply-prediction.ts), so the two count alike.
 */

/** A whole-list read is fresh for at least this many times its own duration. */
export const DRIFT_PASS_SPACING = 4;

/**
 * A pass that serves a plain import's before-values (not a drift check) is fresh for this many
 * times its own duration at least: before-value pages stay ≤ 1/20 of the budget, however large
 * the list (DriftCheck.values).
 */
export const BEFORE_PASS_SPACING = 20;

/**
 * A process reads single pages (a planned row's page, where the plan saw its record) while the
 * pages it read in the last drift window stay under this share of the list's pages; past it,
 * one whole-list read is cheaper than going on page by page (rows spread over the whole list).
 */
export const DRIFT_PAGE_READ_SHARE = 0.25;

/**
 * A row this far into its page (a share of the page size) also starts reading the next page, if
 * the list has one and it is not fresh: a plan's rows come in list order when its records sit
 * together, and the rows that reach the next page then find it read instead of all waiting for it.
 */
export const DRIFT_READ_AHEAD_FROM = 0.5;

/** The 1-based page that holds 0-based list place `place`. */
export function pageOfPlace(place: number, pageSize: number): number {
  return Math.floor(place / pageSize) + 1;
}

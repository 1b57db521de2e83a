/**
 * The retry policy (spec "Limits"; docs/api.md, "Retries"; CONTRIBUTING.md, Habits 13): what follows an
 * attempt of a destination is decided here, once, and every other place asks: the dispatcher's
 * attempt and backoff, the relay's attempt budget, the sweeper's resumption and the dashboard's
 * next retry. One counting convention, the deliveries log's: attempt 0 is the initial attempt,
 * attempt n is retry n, and the retry after a failed attempt n waits `retryDelaysMs[n]` ms
 * (DELIVERY_RETRY_DELAYS_MS), counted from that attempt's end.
 */

/**
 * How an attempt went: `succeeded` (a 2xx), `failed` (anything a retry may change), or
 * `unretryable` (a failure no retry can change, such as a payload purged before it was sent).
 */
export type AttemptOutcome = "succeeded" | "failed" | "unretryable";

/** What follows an attempt: the destination is delivered, retried at `at`, or failed. */
export type AfterAttempt =
  | { next: "delivered" }
  | {
      next: "retry";
      /** The retry's attempt number (the failed one's plus 1). */
      attempt: number;
      /** Its delay after the failed attempt's end, in ms. */
      delayMs: number;
      /** When it is due: `endedAt` plus `delayMs`. */
      at: Date;
    }
  | { next: "failed" };

/**
 * What follows attempt number `attempt` (0: the initial one) that ended at `endedAt` with
 * `outcome`, on the schedule `retryDelaysMs`: `delivered` after a success; a retry while the
 * schedule has a delay for it; else `failed`.
 */
export function decideAfterAttempt(
  retryDelaysMs: readonly number[],
  attempt: number,
  outcome: AttemptOutcome,
  endedAt: Date,
): AfterAttempt {
  if (outcome === "succeeded") return { next: "delivered" };
  const delayMs = outcome === "failed" ? retryDelaysMs[attempt] : undefined;
  if (delayMs === undefined) return { next: "failed" };
  return { next: "retry", attempt: attempt + 1, delayMs, at: new Date(endedAt.getTime() + delayMs) };
}

/**
 * How many attempts work that starts at attempt `firstAttempt` may make on the schedule, every
 * one failing (1 at least: one past the last retry still runs and ends the work): BullMQ's
 * `attempts` of a delivery job.
 */
export function attemptBudget(retryDelaysMs: readonly number[], firstAttempt: number): number {
  let attempts = 1;
  for (let attempt = firstAttempt; decideAfterAttempt(retryDelaysMs, attempt, "failed", new Date(0)).next === "retry"; attempt++)
    attempts++;
  return attempts;
}

/** `attemptBudget` over one schedule: what the relay's DeliveryQueue is given. */
export function attemptBudgetOf(retryDelaysMs: readonly number[]): (firstAttempt: number) => number {
  return (firstAttempt) => attemptBudget(retryDelaysMs, firstAttempt);
}

/** The number of the last attempt the schedule allows (the last retry's; 0 with no retry). */
export function lastAttempt(retryDelaysMs: readonly number[]): number {
  return attemptBudget(retryDelaysMs, 0) - 1;
}

/**
 * The retry policy (spec "Limits"; docs/api.md, "Retries"): what follows an
 * attempt of a destination is decided here, once, and every other place asks: the dispatcher's
 * attempt, a listen webhook's answered pull (listen.ts) and the dashboard's next retry. One counting convention, the deliveries log's: attempt 0 is the initial attempt,
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

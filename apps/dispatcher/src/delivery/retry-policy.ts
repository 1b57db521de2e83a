/**
 * What follows an attempt is `decideAfterAttempt` of @mailhooks/delivery-state (one rule, also
 * read by the relay, the sweeper and the dashboard); deliverDestination and the worker's backoff
 * strategy call it.
 */

/** Thrown by a delivery attempt that failed and has a retry left; BullMQ schedules the retry. */
export class RetryableDeliveryError extends Error {
  override name = "RetryableDeliveryError";
}

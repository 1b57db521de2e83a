/**
 * The retry schedule itself is `retryDelayFor` of @mailhooks/delivery-state (one rule, also read
 * by the dashboard); the worker's backoff strategy calls it.
 */

/** Thrown by a delivery attempt that failed and has a retry left; BullMQ schedules the retry. */
export class RetryableDeliveryError extends Error {
  override name = "RetryableDeliveryError";
}

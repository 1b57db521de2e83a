import type { DispatcherConfig } from "@mailhooks/config";
import { createBatcher, releaseLeases } from "@mailhooks/delivery-state";
import { createAdmissionControl, createRateLimits, startLeaseKeeper } from "@mailhooks/scheduler";
import type { DeliveryContext } from "./jobs/deliver-destination.js";
import type { DeliveryWorkerOptions, WorkerScheduler } from "./worker.js";

/**
 * The period of the scheduler's review, in ms: a lifted rate_limit takes effect within this plus
 * the rate limits' cache (1 s), and the other dispatchers' slow marks are learnt within it.
 */
const REVIEW_MS = 1_000;

/**
 * The scheduler of one dispatcher: admission (shares in memory; rate_limit turns and slow marks
 * over `wiring.connection`), the webhooks' rate limits from PostgreSQL, lease releases batched,
 * the lease keeper every DISPATCHER_STALLED_INTERVAL_MS, and a review every second (lifted rate
 * limits, the other dispatchers' slow marks). `stop` ends the timers.
 */
export function startWorkerScheduler(
  config: DispatcherConfig,
  wiring: Pick<DeliveryContext, "pool" | "logger" | "metrics"> &
    Pick<DeliveryWorkerOptions, "connection" | "prefix"> & { queuePrefix: string },
): WorkerScheduler & { stop: () => void; wakeHeldJobs: (promote: (jobId: string) => Promise<void>) => void } {
  const { pool, logger, metrics, connection } = wiring;
  let promote: ((jobId: string) => Promise<void>) | undefined;
  const admission = createAdmissionControl({
    promote: (jobId) => promote?.(jobId) ?? Promise.resolve(),
    redis: connection,
    keyPrefix: wiring.prefix,
    localConcurrency: config.DISPATCHER_CONCURRENCY,
    slowAttemptMs: config.DISPATCHER_SLOW_ATTEMPT_MS,
  });
  const releases = createBatcher(async (ids: string[]) => (await releaseLeases(pool, ids), ids.map(() => undefined)), {
    maxBatch: 64,
    maxConcurrency: 2,
  });
  const rateLimits = createRateLimits(pool);
  const review = () => {
    void admission.refreshSlowMarks().catch((error: Error) => logger.warn("could not read the slow marks", { error: error.message }));
    void admission
      .reviewRateLimits((webhookId) => rateLimits.get(webhookId))
      .catch((error: Error) => logger.warn("rate limit review failed", { error: error.message }));
  };
  review();
  const reviews = setInterval(review, REVIEW_MS);
  reviews.unref();
  const keeper = startLeaseKeeper({
    pool,
    redis: connection,
    keyPrefix: wiring.prefix,
    queuePrefix: wiring.queuePrefix,
    intervalMs: config.DISPATCHER_STALLED_INTERVAL_MS,
    onDropped: (count) => {
      logger.info("scheduler leases dropped: their jobs were gone from Redis", { count });
      metrics.leasesDropped.inc(count);
    },
    onError: (error) => logger.warn("lease keeper failed; it tries again", { error: error.message }),
  });
  return {
    admission,
    rateLimits,
    releaseLease: (workId) =>
      void releases
        .submit(workId)
        .catch((error: Error) => logger.warn("could not release a lease; the lease keeper will", { workId, error: error.message })),
    wakeHeldJobs: (wake) => (promote = wake),
    stop: () => {
      clearInterval(reviews);
      void keeper.close();
    },
  };
}

import type { DispatcherConfig } from "@mailhooks/config";
import { createBatcher, LATE_LEASE_RELEASE_MS, releaseLeases } from "@mailhooks/delivery-state";
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
 * limits, the other dispatchers' slow marks). `wiring.onRoom` is called when leases ended (the
 * dispatcher's relay looks again if it held work back). `stop` ends the timers.
 */
export function startWorkerScheduler(
  config: DispatcherConfig,
  wiring: Pick<DeliveryContext, "pool" | "logger" | "metrics"> &
    Pick<DeliveryWorkerOptions, "connection" | "prefix"> & { queuePrefix: string; onRoom?: () => void },
): WorkerScheduler & { stop: () => void; wakeHeldJobs: (promote: (jobId: string) => Promise<void>) => void } {
  const { pool, logger, metrics, connection } = wiring;
  const roomMade = () => wiring.onRoom?.();
  let promote: ((jobId: string) => Promise<void>) | undefined;
  const admission = createAdmissionControl({
    promote: (jobId) => promote?.(jobId) ?? Promise.resolve(),
    redis: connection,
    keyPrefix: wiring.prefix,
    localConcurrency: config.DISPATCHER_CONCURRENCY,
    slowAttemptMs: config.DISPATCHER_SLOW_ATTEMPT_MS,
  });
  /** Per work id, whether its lease was there to end. */
  const releases = createBatcher(
    async (ids: string[]) => {
      const unleased = new Set(await releaseLeases(pool, ids));
      if (unleased.size < ids.length) roomMade();
      return ids.map((id) => !unleased.has(id));
    },
    { maxBatch: 64, maxConcurrency: 2 },
  );
  const lateReleases = createLateReleases((ids) =>
    releaseLeases(pool, ids).then(
      (unleased) => void (unleased.length < ids.length && roomMade()),
      (error: Error) =>
        void logger.warn("could not release leases late; the lease keeper will", { count: ids.length, error: error.message }),
    ),
  );
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
      roomMade();
    },
    onError: (error) => logger.warn("lease keeper failed; it tries again", { error: error.message }),
  });
  return {
    admission,
    rateLimits,
    releaseLease: (workId) =>
      void releases.submit(workId).then(
        (found) => found || lateReleases.add(workId),
        (error: Error) => logger.warn("could not release a lease; the lease keeper will", { workId, error: error.message }),
      ),
    roomMade,
    wakeHeldJobs: (wake) => (promote = wake),
    stop: () => {
      clearInterval(reviews);
      lateReleases.stop();
      void keeper.close();
    },
  };
}

/** Work ids waiting for their late release at most; past it the lease keeper drops the rest's leases. */
const LATE_RELEASES_MAX = 10_000;

/**
 * The second look for leases that were not there when their work ended (LATE_LEASE_RELEASE_MS):
 * `add` keeps a work id, and `release` gets it, with the others due by then, no sooner than that
 * long after. At most LATE_RELEASES_MAX wait (ids beyond are left to the lease keeper), so a
 * dispatcher whose jobs carry no leases at all (work relayed before leases existed) spends a
 * bounded amount on them.
 */
export function createLateReleases(release: (workIds: string[]) => Promise<void>): { add: (workId: string) => void; stop: () => void } {
  const due: { workId: string; at: number }[] = [];
  let timer: NodeJS.Timeout | undefined;
  const arm = () => {
    if (timer || due.length === 0) return;
    timer = setTimeout(
      () => {
        timer = undefined;
        const now = Date.now();
        let n = 0;
        while (n < due.length && due[n].at <= now) n++;
        const ids = due.splice(0, n).map((d) => d.workId);
        if (ids.length > 0) void release(ids);
        arm();
      },
      Math.max(0, due[0].at - Date.now()),
    );
    timer.unref();
  };
  return {
    add: (workId) => {
      if (due.length >= LATE_RELEASES_MAX) return;
      due.push({ workId, at: Date.now() + LATE_LEASE_RELEASE_MS });
      arm();
    },
    stop: () => {
      clearTimeout(timer);
      timer = undefined;
      due.length = 0;
    },
  };
}

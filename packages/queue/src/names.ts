/**
 * Queue and job names shared by the API (producer) and the dispatcher (worker).
 *
 * WARNING: these strings are stored in Redis with every job. Renaming one strands the jobs
 * already queued under the old name: add the new name and drain the old one instead.
 */
export const QUEUE_NAMES = {
  /** Every outbound HTTP attempt: initial deliveries with their retries, test events, replays. */
  deliveries: "deliveries",
  /**
   * The same jobs, granted from the reserve: a lane of their own, with a worker of their own in
   * each dispatcher, so that no job waiting in the first one stands in their way (docs/scheduler.md).
   */
  reserveDeliveries: "deliveries-reserve",
  /** Periodic housekeeping (retention, sweeps), run by job schedulers in the dispatcher. */
  maintenance: "maintenance",
} as const;

export const JOB_NAMES = {
  delivery: "delivery",
  testDelivery: "test-delivery",
  replay: "replay",
  retention: "retention",
  idempotencyPurge: "idempotency-purge",
} as const;

/**
 * The jobs of the maintenance queue: they carry no data, and only the dispatchers' job
 * schedulers make them. The deliveries queue's jobs are the kinds of work (WORK_JOB_NAMES, jobs.ts).
 */
export type MaintenanceJobName = (typeof JOB_NAMES)["retention" | "idempotencyPurge"];

/** Job schedulers of earlier versions, removed by the dispatchers' maintenance when they start. */
export const RETIRED_MAINTENANCE_JOBS = ["sweep", "queue-vacuum"] as const;

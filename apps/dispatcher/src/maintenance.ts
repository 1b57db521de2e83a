import { Queue, Worker } from "bullmq";
import type pg from "pg";
import { purgeExpiredPayloads, purgeIdempotencyKeys, vacuumQueueTables } from "@mailhooks/delivery-state";
import type { Logger } from "@mailhooks/logger";
import { JOB_NAMES, QUEUE_NAMES, type DeliveryQueue, type MaintenanceJobName, type RedisClient } from "@mailhooks/queue";
import { sweepLostWork } from "./jobs/sweep-lost-work.js";
import type { DispatcherMetrics } from "./metrics.js";

/**
 * Housekeeping run by BullMQ job schedulers: every dispatcher upserts the same scheduler ids, so
 * however many replicas run, each job runs once per period: payload retention (hourly: drops
 * the day partitions past EVENT_RETENTION_DAYS and makes the coming days' ones; what a long
 * reader of event_payloads kept it from doing waits for the next run), expired
 * idempotency keys (hourly), the sweeper of lost work (SWEEP_INTERVAL_MS), and the VACUUM of the
 * scheduler's queue tables (OUTBOX_VACUUM_INTERVAL_MS, unless 0).
 *
 * The schedulers live in Redis, which may lose them (FLUSHALL, a failover, a restart without
 * persistence) like any job: every dispatcher upserts them again each time its connection is
 * ready again and every SWEEP_INTERVAL_MS. An upsert of an unchanged scheduler keeps its next
 * run where it was, so this never postpones a run; a lost one is made again and runs at once.
 */
export interface MaintenanceOptions {
  connection: RedisClient;
  /** The Redis key prefix (QUEUE_PREFIX, hash-tagged on a Redis Cluster). */
  prefix: string;
  /** QUEUE_PREFIX as the database knows the deployment's rows. */
  queuePrefix: string;
  pool: pg.Pool;
  retentionDays: number;
  logger: Logger;
  metrics: DispatcherMetrics;
  /** How often retention and the idempotency purge run, in ms (hourly; the spec needs daily). */
  retentionEveryMs?: number;
  /** The deliveries queue (the process's own; closed by its owner): the sweeper asks it which jobs exist. */
  deliveries: DeliveryQueue;
  /** DELIVERY_RETRY_DELAYS_MS, for the attempt and due time of re-queued destinations. */
  retryDelaysMs: readonly number[];
  /** How often the sweeper runs, and how old pending work must be before it looks, in ms. */
  sweepEveryMs: number;
  sweepAfterMs: number;
  /** Pending rows of each kind the sweeper looks at per run. */
  sweepBatchSize?: number;
  /** How often the queue tables are vacuumed, in ms; 0 or absent: never (autovacuum's). */
  queueVacuumEveryMs?: number;
}

export async function startMaintenance(options: MaintenanceOptions): Promise<{ close: () => Promise<void> }> {
  const queue = new Queue(QUEUE_NAMES.maintenance, { connection: options.connection, prefix: options.prefix });
  const every = options.retentionEveryMs ?? 3_600_000;
  const upsert = (name: string, ms: number) =>
    queue.upsertJobScheduler(name, { every: ms }, { name, opts: { removeOnComplete: true, removeOnFail: 100 } });
  const schedule = async () => {
    const lost = !(await queue.getJobScheduler(JOB_NAMES.sweep));
    await upsert(JOB_NAMES.retention, every);
    await upsert(JOB_NAMES.idempotencyPurge, every);
    await upsert(JOB_NAMES.sweep, options.sweepEveryMs);
    if (options.queueVacuumEveryMs) await upsert(JOB_NAMES.queueVacuum, options.queueVacuumEveryMs);
    else await queue.removeJobScheduler(JOB_NAMES.queueVacuum);
    return lost;
  };
  await schedule();
  let scheduling = false;
  const scheduleAgain = () => {
    if (scheduling) return;
    scheduling = true;
    schedule()
      .then((lost) => {
        if (lost) {
          options.logger.warn("maintenance schedulers were missing from Redis (flushed or restarted without persistence); made again");
          options.metrics.schedulersRestored.inc();
        }
      })
      .catch((error: Error) =>
        options.logger.warn("could not upsert the maintenance schedulers; trying again later", { error: error.message }),
      )
      .finally(() => (scheduling = false));
  };
  const timer = setInterval(scheduleAgain, options.sweepEveryMs);
  timer.unref();
  options.connection.on("ready", scheduleAgain);
  /** What each job of the queue does, by its name. */
  const run: Record<MaintenanceJobName, () => Promise<void>> = {
    [JOB_NAMES.queueVacuum]: () => vacuumQueueTables(options.pool),
    [JOB_NAMES.retention]: async () => {
      const purged = await purgeExpiredPayloads(options.pool, options.retentionDays);
      if (purged.droppedPartitions.length > 0) {
        options.logger.info("payloads past retention removed", {
          partitions: purged.droppedPartitions,
          purgedBefore: purged.purgedBefore.toISOString(),
        });
      }
      // Another session held event_payloads past retention's lock_timeout: this run gave up
      // rather than stall ingest; the next one (an hour later) tries again.
      if (purged.postponedPartitions.length > 0) {
        options.logger.warn("payload partitions past retention left for the next run", {
          partitions: purged.postponedPartitions,
          reason: purged.postponedReason,
        });
      }
      if (!purged.partitionsAheadMade)
        options.logger.warn("the coming days' payload partitions could not be made (lock timeout); the next run tries again");
    },
    [JOB_NAMES.idempotencyPurge]: async () => {
      const removed = await purgeIdempotencyKeys(options.pool);
      if (removed > 0) options.logger.info("expired idempotency keys removed", { removed });
    },
    [JOB_NAMES.sweep]: async () => {
      const queued = await sweepLostWork({
        pool: options.pool,
        redis: options.connection,
        queue: options.deliveries,
        queuePrefix: options.queuePrefix,
        retryDelaysMs: options.retryDelaysMs,
        afterMs: options.sweepAfterMs,
        batchSize: options.sweepBatchSize,
        // Up to half a period: a backlog is walked in several batches, and the next run is not late.
        timeBudgetMs: options.sweepEveryMs / 2,
        onKindError: (kind, error) =>
          options.logger.error("sweeping lost work failed for one kind; the others went on", { kind, error: (error as Error).message }),
        onEnded: (kind, ids) => {
          options.logger.error("work whose job failed for good ended failed by the sweeper", { kind, ids });
          options.metrics.jobsFailed.inc({ job: kind, reason: "failed_job_swept" }, ids.length);
        },
      });
      if (queued > 0) {
        options.logger.warn("work whose job was lost queued again", { queued });
        options.metrics.lostWorkRequeued.inc(queued);
      }
    },
  };
  const worker = new Worker(
    QUEUE_NAMES.maintenance,
    async (job) => {
      if (!Object.hasOwn(run, job.name)) throw new Error(`unknown job ${job.name}`);
      await run[job.name as MaintenanceJobName]();
    },
    { connection: options.connection, prefix: options.prefix, concurrency: 1 },
  );
  worker.on("error", (error) => options.logger.error("maintenance worker error", { error: error.message }));
  return {
    close: async () => {
      clearInterval(timer);
      options.connection.off("ready", scheduleAgain);
      await worker.close();
      await queue.close();
    },
  };
}

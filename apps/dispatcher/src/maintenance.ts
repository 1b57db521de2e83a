import { Queue, Worker } from "bullmq";
import type pg from "pg";
import { purgeExpiredPayloads, purgeIdempotencyKeys } from "@mailhooks/delivery-state";
import type { Logger } from "@mailhooks/logger";
import { JOB_NAMES, QUEUE_NAMES, RETIRED_MAINTENANCE_JOBS, type MaintenanceJobName, type RedisClient } from "@mailhooks/queue";
import type { DispatcherMetrics } from "./metrics.js";

/**
 * Housekeeping run by BullMQ job schedulers: every dispatcher upserts the same scheduler ids, so
 * however many replicas run, each job runs once per period: payload retention (drops the day
 * partitions past EVENT_RETENTION_DAYS and makes the coming days' ones; what a long reader of
 * event_payloads kept it from doing waits for the next run) and the purge of expired idempotency
 * keys, both every `everyMs` (hourly).
 *
 * The schedulers live in Redis, which may lose them (FLUSHALL, a failover, a restart without
 * persistence) like any job: every dispatcher upserts them again each time its connection is
 * ready again and every CHECK_EVERY_MS. An upsert of an unchanged scheduler keeps its next run
 * where it was, so this never postpones a run; a lost one is made again and runs at once.
 */
export interface MaintenanceOptions {
  connection: RedisClient;
  /** The Redis key prefix (QUEUE_PREFIX, hash-tagged on a Redis Cluster). */
  prefix: string;
  pool: pg.Pool;
  retentionDays: number;
  logger: Logger;
  metrics: DispatcherMetrics;
  /** How often retention and the idempotency purge run, in ms (hourly; the spec needs daily). */
  everyMs?: number;
}

/**
 * How often each dispatcher checks that the schedulers are still in Redis, in ms: a scheduler lost
 * with a flush runs again at most this late, against its period of an hour.
 */
export const CHECK_EVERY_MS = 60_000;

export async function startMaintenance(options: MaintenanceOptions): Promise<{ close: () => Promise<void> }> {
  const queue = new Queue(QUEUE_NAMES.maintenance, { connection: options.connection, prefix: options.prefix });
  const every = options.everyMs ?? 3_600_000;
  const upsert = (name: string) => queue.upsertJobScheduler(name, { every }, { name, opts: { removeOnComplete: true, removeOnFail: 100 } });
  const schedule = async () => {
    const lost = !(await queue.getJobScheduler(JOB_NAMES.retention));
    await upsert(JOB_NAMES.retention);
    await upsert(JOB_NAMES.idempotencyPurge);
    for (const retired of RETIRED_MAINTENANCE_JOBS) await queue.removeJobScheduler(retired);
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
  const timer = setInterval(scheduleAgain, CHECK_EVERY_MS);
  timer.unref();
  options.connection.on("ready", scheduleAgain);
  /** What each job of the queue does, by its name. */
  const run: Record<MaintenanceJobName, () => Promise<void>> = {
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
  };
  const worker = new Worker(
    QUEUE_NAMES.maintenance,
    async (job) => {
      // A retired scheduler's last job, made before the scheduler was removed: nothing to do.
      if ((RETIRED_MAINTENANCE_JOBS as readonly string[]).includes(job.name)) return;
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

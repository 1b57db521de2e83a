import { Queue, Worker } from "bullmq";
import type { Redis } from "ioredis";
import type { PrismaClient } from "@mailhooks/db";
import type { Logger } from "@mailhooks/logger";
import { JOB_NAMES, QUEUE_NAMES, type DeliveryQueue } from "@mailhooks/queue";
import { purgeExpiredPayloads } from "./jobs/purge-payloads.js";
import { sweepDestinations } from "./jobs/sweep-destinations.js";

/**
 * Housekeeping run by BullMQ job schedulers: every dispatcher upserts the same scheduler ids, so
 * however many replicas run, each job runs once per period.
 */
export interface MaintenanceOptions {
  connection: Redis;
  prefix: string;
  prisma: PrismaClient;
  retentionDays: number;
  logger: Logger;
  /** How often retention runs, in ms (hourly; the spec needs at least daily). */
  retentionEveryMs?: number;
  /** The deliveries queue the sweeper adds to (the process's own; closed by its owner). */
  deliveries: DeliveryQueue;
  /** DELIVERY_RETRY_DELAYS_MS and DELIVERY_TIMEOUT_MS, for the jobs the sweeper queues. */
  retryDelaysMs: readonly number[];
  timeoutMs: number;
  /** How often the sweeper runs, and how old a destination without attempt must be, in ms. */
  sweepEveryMs: number;
  sweepAfterMs: number;
}

export async function startMaintenance(options: MaintenanceOptions): Promise<{ close: () => Promise<void> }> {
  const queue = new Queue(QUEUE_NAMES.maintenance, { connection: options.connection, prefix: options.prefix });
  await queue.upsertJobScheduler(
    JOB_NAMES.retention,
    { every: options.retentionEveryMs ?? 3_600_000 },
    { name: JOB_NAMES.retention, opts: { removeOnComplete: true, removeOnFail: 100 } },
  );
  await queue.upsertJobScheduler(
    JOB_NAMES.sweep,
    { every: options.sweepEveryMs },
    { name: JOB_NAMES.sweep, opts: { removeOnComplete: true, removeOnFail: 100 } },
  );
  const worker = new Worker(
    QUEUE_NAMES.maintenance,
    async (job) => {
      if (job.name === JOB_NAMES.retention) {
        const removed = await purgeExpiredPayloads(options.prisma, options.retentionDays);
        if (removed > 0) options.logger.info("payloads past retention removed", { removed });
      } else if (job.name === JOB_NAMES.sweep) {
        const queued = await sweepDestinations(options.prisma, options.deliveries, {
          afterMs: options.sweepAfterMs,
          retryDelaysMs: options.retryDelaysMs,
          timeoutMs: options.timeoutMs,
        });
        if (queued > 0) options.logger.warn("destinations without a job queued again", { queued });
      } else {
        throw new Error(`unknown job ${job.name}`);
      }
    },
    { connection: options.connection, prefix: options.prefix, concurrency: 1 },
  );
  worker.on("error", (error) => options.logger.error("maintenance worker error", { error: error.message }));
  return {
    close: async () => {
      await worker.close();
      await queue.close();
    },
  };
}

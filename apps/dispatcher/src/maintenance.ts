import { Queue, Worker } from "bullmq";
import type { Redis } from "ioredis";
import type { PrismaClient } from "@mailhooks/db";
import type { Logger } from "@mailhooks/logger";
import { JOB_NAMES, QUEUE_NAMES } from "@mailhooks/queue";
import { purgeExpiredPayloads } from "./jobs/purge-payloads.js";

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
}

export async function startMaintenance(options: MaintenanceOptions): Promise<{ close: () => Promise<void> }> {
  const queue = new Queue(QUEUE_NAMES.maintenance, { connection: options.connection, prefix: options.prefix });
  await queue.upsertJobScheduler(
    JOB_NAMES.retention,
    { every: options.retentionEveryMs ?? 3_600_000 },
    { name: JOB_NAMES.retention, opts: { removeOnComplete: true, removeOnFail: 100 } },
  );
  const worker = new Worker(
    QUEUE_NAMES.maintenance,
    async (job) => {
      if (job.name !== JOB_NAMES.retention) throw new Error(`unknown job ${job.name}`);
      const removed = await purgeExpiredPayloads(options.prisma, options.retentionDays);
      if (removed > 0) options.logger.info("payloads past retention removed", { removed });
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

import { Queue } from "bullmq";
import type { RedisClient } from "./connection.js";
import { workJob, type ClaimedWork } from "./jobs.js";
import { QUEUE_NAMES } from "./names.js";

/**
 * The deliveries queue as the relay (its only producer) uses it: claimed work goes in, one job
 * per claim (workJob). Finished jobs are removed by the queue itself (PostgreSQL keeps the
 * history); failed ones are kept a week, at most 10,000.
 */
export class DeliveryQueue {
  readonly queue: Queue;

  constructor(
    private readonly connection: RedisClient,
    prefix: string,
  ) {
    this.queue = new Queue(QUEUE_NAMES.deliveries, {
      connection,
      prefix,
      defaultJobOptions: { removeOnComplete: true, removeOnFail: { age: 7 * 24 * 3600, count: 10_000 } },
    });
  }

  /** Adds the jobs of `work` in one round trip (BullMQ addBulk, all or none). */
  async add(work: readonly ClaimedWork[]): Promise<void> {
    if (work.length > 0) await this.queue.addBulk(work.map(workJob));
  }

  /** Resolves once Redis answers a PING on this queue's connection; throws what the connection throws. */
  async ping(): Promise<void> {
    await this.connection.ping();
  }

  async close(): Promise<void> {
    await this.queue.close();
  }
}

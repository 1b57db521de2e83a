import { Queue, type JobsOptions } from "bullmq";
import type { Redis } from "ioredis";
import { deliveryJob, replayJob, testDeliveryJob, type DeliveryJobData, type ReplayJobData, type TestDeliveryJobData } from "./jobs.js";
import { DELIVERY_BACKOFF_TYPE, QUEUE_NAMES } from "./names.js";

/**
 * The deliveries queue as the API (and any producer) uses it. Every add is typed by the job
 * definitions; finished jobs are removed by the queue itself (PostgreSQL keeps the history).
 */
export class DeliveryQueue {
  readonly queue: Queue;

  /**
   * @param retryDelaysMs the retry schedule (DELIVERY_RETRY_DELAYS_MS): a delivery job gets
   *   `1 + retryDelaysMs.length` attempts.
   */
  constructor(connection: Redis, prefix: string, private readonly retryDelaysMs: readonly number[]) {
    this.queue = new Queue(QUEUE_NAMES.deliveries, {
      connection,
      prefix,
      defaultJobOptions: { removeOnComplete: true, removeOnFail: { age: 7 * 24 * 3600, count: 10_000 } },
    });
  }

  /** Options of a destination's delivery job. The job id is the destination id, so enqueuing the
   * same destination twice (sweeper, retry of a request) never creates a second job. */
  deliveryJobOptions(destinationId: string, firstAttempt = 0): JobsOptions {
    return {
      jobId: destinationId,
      attempts: Math.max(1, 1 + this.retryDelaysMs.length - firstAttempt),
      backoff: { type: DELIVERY_BACKOFF_TYPE },
    };
  }

  /** Enqueues the initial attempt of each destination (or, with `firstAttempt`, the next one). */
  async addDeliveries(jobs: DeliveryJobData[]): Promise<void> {
    if (jobs.length === 0) return;
    await this.queue.addBulk(
      jobs.map((data) => ({
        name: deliveryJob.name,
        data: deliveryJob.schema.parse(data),
        opts: this.deliveryJobOptions(data.destinationId, data.firstAttempt),
      })),
    );
  }

  /** Enqueues the one-attempt test event of a new webhook. */
  async addTestDelivery(data: TestDeliveryJobData): Promise<void> {
    await this.queue.add(testDeliveryJob.name, testDeliveryJob.schema.parse(data), { jobId: `test_${data.webhookId}`, attempts: 1 });
  }

  /** Enqueues replays; the job id is the replay id, so a repeated add is a no-op. */
  async addReplays(jobs: ReplayJobData[]): Promise<void> {
    if (jobs.length === 0) return;
    await this.queue.addBulk(
      jobs.map((data) => ({ name: replayJob.name, data: replayJob.schema.parse(data), opts: { jobId: data.replayId, attempts: 1 } })),
    );
  }

  async close(): Promise<void> {
    await this.queue.close();
  }
}

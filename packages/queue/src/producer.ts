import { Queue, type JobsOptions } from "bullmq";
import type { RedisClient } from "./connection.js";
import { isWorkJobName, prepareWorkJob, type AttemptBudget } from "./jobs.js";
import { QUEUE_NAMES } from "./names.js";

/**
 * The deliveries queue as the relay (its only producer) uses it. Every job's id is the id of
 * its unit of work (destination, replay or test delivery): adding the same work twice while its
 * job lives is a no-op, so a relay that runs again after a crash never makes a second live job.
 * Finished jobs are removed by the queue itself (PostgreSQL keeps the history).
 */

/** A job to add, as the outbox holds it. */
export interface QueuedJob {
  jobName: string;
  jobId: string;
  data: unknown;
  /** The webhook and account the work is for (null for rows from before they were recorded). */
  webhookId?: string | null;
  accountId?: string | null;
  /**
   * Its place among its webhook's jobs in the queue (1: the first). It becomes the job's BullMQ
   * priority, so that workers take every webhook's first job before any webhook's second: a
   * webhook with a backlog never stands in front of another's work.
   */
  position?: number;
}

/** BullMQ's highest priority number (the lowest priority). */
const LOWEST_PRIORITY = 2_097_152;

export class DeliveryQueue {
  readonly queue: Queue;

  /**
   * @param attemptBudget the attempts a job on the retry schedule gets, from the attempt it
   *   starts at: `attemptBudgetOf(DELIVERY_RETRY_DELAYS_MS)` of @mailhooks/delivery-state.
   */
  constructor(
    connection: RedisClient,
    prefix: string,
    private readonly attemptBudget: AttemptBudget,
  ) {
    this.queue = new Queue(QUEUE_NAMES.deliveries, {
      connection,
      prefix,
      defaultJobOptions: { removeOnComplete: true, removeOnFail: { age: 7 * 24 * 3600, count: 10_000 } },
    });
  }

  /**
   * The name, data and options BullMQ gets for `job`, its data checked by the schema of the job
   * of that name in the registry (WORK_JOBS), its options (attempt budget, backoff, delay) the
   * definition's.
   * @throws ZodError for data that no worker could run, Error for an unknown job name
   */
  toBulkJob(job: QueuedJob, now = Date.now()): { name: string; data: unknown; opts: JobsOptions } {
    if (!isWorkJobName(job.jobName)) throw new Error(`unknown job name ${JSON.stringify(job.jobName)}`);
    const owner = job.webhookId && job.accountId ? { webhookId: job.webhookId, accountId: job.accountId } : {};
    const priority = Math.min(LOWEST_PRIORITY, Math.max(1, Math.trunc(job.position ?? 1)));
    const { data, options } = prepareWorkJob(job.jobName, { ...(job.data as object), ...owner }, this.attemptBudget, now);
    return { name: job.jobName, data, opts: { jobId: job.jobId, priority, ...options } };
  }

  /** Adds `jobs` in one round trip (BullMQ addBulk). */
  async addJobs(jobs: { name: string; data: unknown; opts: JobsOptions }[]): Promise<void> {
    if (jobs.length > 0) await this.queue.addBulk(jobs);
  }

  async close(): Promise<void> {
    await this.queue.close();
  }
}

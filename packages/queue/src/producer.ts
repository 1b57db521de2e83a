import { Queue } from "bullmq";
import type { RedisClient } from "./connection.js";
import { workJob, type ClaimedWork } from "./jobs.js";
import { QUEUE_NAMES } from "./names.js";

/** What DeliveryQueue.add throws: the error of the lane that refused its jobs, and the work whose jobs are not in Redis. */
export class DeliveryAddError extends Error {
  constructor(
    cause: unknown,
    readonly notAdded: readonly ClaimedWork[],
  ) {
    super(cause instanceof Error ? cause.message : String(cause), { cause });
    this.name = "DeliveryAddError";
  }
}

/**
 * The deliveries queues as the relay (their only producer) uses them: claimed work goes in, one
 * job per claim (workJob), in the slots' lane (QUEUE_NAMES.deliveries) or, granted from the
 * reserve, in the reserve's (QUEUE_NAMES.reserveDeliveries). Finished jobs are removed by the
 * queues themselves (PostgreSQL keeps the history); failed ones are kept a week, at most 10,000.
 */
export class DeliveryQueue {
  /** The slots' lane. */
  readonly queue: Queue;
  /** The reserve's lane. */
  readonly reserveQueue: Queue;

  constructor(
    private readonly connection: RedisClient,
    prefix: string,
  ) {
    const options = {
      connection,
      prefix,
      defaultJobOptions: { removeOnComplete: true, removeOnFail: { age: 7 * 24 * 3600, count: 10_000 } },
    };
    this.queue = new Queue(QUEUE_NAMES.deliveries, options);
    this.reserveQueue = new Queue(QUEUE_NAMES.reserveDeliveries, options);
    // A queue re-emits its connection's errors, and an 'error' no one listens to ends the process:
    // the relay learns of a Redis outage from add's rejection, and the connection's owner logs it.
    for (const queue of [this.queue, this.reserveQueue]) queue.on("error", () => undefined);
  }

  /**
   * Adds the jobs of `work` to their lanes, one round trip per lane used (BullMQ addBulk: all of a
   * lane or none of it).
   * @throws DeliveryAddError naming the work whose jobs are not in Redis
   */
  async add(work: readonly ClaimedWork[]): Promise<void> {
    const lanes: [Queue, ClaimedWork[]][] = [
      [this.queue, work.filter((w) => !w.reserved)],
      [this.reserveQueue, work.filter((w) => w.reserved)],
    ];
    for (const [index, [queue, jobs]] of lanes.entries()) {
      if (jobs.length === 0) continue;
      try {
        await queue.addBulk(jobs.map(workJob));
      } catch (error) {
        throw new DeliveryAddError(
          error,
          lanes.slice(index).flatMap(([, rest]) => rest),
        );
      }
    }
  }

  /** Resolves once Redis answers a PING on this queue's connection; throws what the connection throws. */
  async ping(): Promise<void> {
    await this.connection.ping();
  }

  async close(): Promise<void> {
    await Promise.all([this.queue.close(), this.reserveQueue.close()]);
  }
}

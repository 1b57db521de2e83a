import { Worker, type Job } from "bullmq";
import type { Redis } from "ioredis";
import { deliveryJob, JOB_NAMES, QUEUE_NAMES, replayJob, testDeliveryJob, DELIVERY_BACKOFF_TYPE } from "@mailhooks/queue";
import { retryDelayFor } from "./delivery/retry-policy.js";
import { deliverDestination, type DeliveryContext } from "./jobs/deliver-destination.js";
import { deliverTestEvent } from "./jobs/deliver-test-event.js";
import { replayEvent } from "./jobs/replay-event.js";

export interface DeliveryWorkerOptions {
  connection: Redis;
  prefix: string;
  concurrency: number;
}

/**
 * The BullMQ worker of the deliveries queue. Thin: it parses each job's data with the job's own
 * schema and calls one function. Retry timing is the custom backoff strategy below.
 */
export function createDeliveryWorker(ctx: DeliveryContext, options: DeliveryWorkerOptions): Worker {
  const processor = async (job: Job) => {
    switch (job.name) {
      case JOB_NAMES.delivery: {
        const { destinationId } = deliveryJob.schema.parse(job.data);
        return deliverDestination(ctx, destinationId, job.attemptsMade);
      }
      case JOB_NAMES.testDelivery: {
        const { webhookId, accountId } = testDeliveryJob.schema.parse(job.data);
        return deliverTestEvent(ctx, webhookId, accountId);
      }
      case JOB_NAMES.replay: {
        const { replayId } = replayJob.schema.parse(job.data);
        return replayEvent(ctx, replayId);
      }
      default:
        throw new Error(`unknown job ${job.name}`);
    }
  };
  const worker = new Worker(QUEUE_NAMES.deliveries, processor, {
    connection: options.connection,
    prefix: options.prefix,
    concurrency: options.concurrency,
    settings: {
      backoffStrategy: (attemptsMade, type) =>
        type === DELIVERY_BACKOFF_TYPE ? retryDelayFor(ctx.retryDelaysMs, attemptsMade) : -1,
    },
  });
  worker.on("error", (error) => ctx.logger.error("worker error", { error: error.message }));
  worker.on("failed", (job, error) => {
    if (error.name !== "RetryableDeliveryError") ctx.logger.error("job failed", { jobId: job?.id, job: job?.name, error: error.message });
  });
  return worker;
}

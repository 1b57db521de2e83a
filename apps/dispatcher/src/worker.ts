import { DelayedError, UnrecoverableError, Worker, type Job } from "bullmq";
import { ZodError } from "zod";
import type { Redis } from "ioredis";
import { deliveryJob, JOB_NAMES, QUEUE_NAMES, replayJob, testDeliveryJob, DELIVERY_BACKOFF_TYPE } from "@mailhooks/queue";
import { RetryableDeliveryError, retryDelayFor } from "./delivery/retry-policy.js";
import { deliverDestination, type DeliveryContext } from "./jobs/deliver-destination.js";
import { deliverTestEvent } from "./jobs/deliver-test-event.js";
import { replayEvent } from "./jobs/replay-event.js";

export interface DeliveryWorkerOptions {
  connection: Redis;
  prefix: string;
  concurrency: number;
  /** How long a job's lock lasts without renewal, in ms: a killed dispatcher's jobs are taken
   * over by another one after about this long. */
  lockDurationMs?: number;
  /** How often stalled jobs are looked for, in ms. */
  stalledIntervalMs?: number;
}

/** Delay before a job postponed by an infrastructure error runs again: 1 s doubling to 30 s. */
export function postponeDelayMs(postponedBefore: number): number {
  return Math.min(30_000, 1_000 * 2 ** Math.max(0, postponedBefore));
}

/**
 * The BullMQ worker of the deliveries queue. Thin: it parses each job's data with the job's own
 * schema and calls one function. Retry timing is the custom backoff strategy below.
 */
export function createDeliveryWorker(ctx: DeliveryContext, options: DeliveryWorkerOptions): Worker {
  const run = async (job: Job) => {
    switch (job.name) {
      case JOB_NAMES.delivery: {
        const { destinationId, firstAttempt = 0 } = deliveryJob.schema.parse(job.data);
        return deliverDestination(ctx, destinationId, firstAttempt + job.attemptsMade);
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
        throw new UnrecoverableError(`unknown job ${job.name}`);
    }
  };
  /**
   * A delivery that failed is a retry (RetryableDeliveryError) and consumes an attempt. Anything
   * else means the attempt could not be read or recorded (PostgreSQL away): the job is postponed
   * without consuming an attempt, so no attempt is ever counted that the log does not show. The
   * request may then be sent again: delivery is at least once.
   */
  const processor = async (job: Job, token?: string) => {
    try {
      return await run(job);
    } catch (error) {
      if (error instanceof RetryableDeliveryError || error instanceof UnrecoverableError) throw error;
      if (error instanceof ZodError) throw new UnrecoverableError(`invalid job data: ${error.message}`);
      const postponedBefore = Math.max(0, job.attemptsStarted - job.attemptsMade - 1);
      const delay = postponeDelayMs(postponedBefore);
      ctx.logger.warn("attempt postponed", { jobId: job.id, job: job.name, delayMs: delay, error: (error as Error).message });
      await job.moveToDelayed(Date.now() + delay, token);
      throw new DelayedError();
    }
  };
  const worker = new Worker(QUEUE_NAMES.deliveries, processor, {
    connection: options.connection,
    prefix: options.prefix,
    concurrency: options.concurrency,
    lockDuration: options.lockDurationMs ?? 30_000,
    stalledInterval: options.stalledIntervalMs ?? 30_000,
    // A job whose dispatcher died is taken over; dying repeatedly must not fail it for good.
    maxStalledCount: 10,
    settings: {
      backoffStrategy: (attemptsMade, type, _error, job) => {
        if (type !== DELIVERY_BACKOFF_TYPE) return -1;
        const firstAttempt = (job?.data as { firstAttempt?: number } | undefined)?.firstAttempt ?? 0;
        return retryDelayFor(ctx.retryDelaysMs, firstAttempt + attemptsMade);
      },
    },
  });
  worker.on("error", (error) => ctx.logger.error("worker error", { error: error.message }));
  worker.on("failed", (job, error) => {
    if (error.name !== "RetryableDeliveryError") ctx.logger.error("job failed", { jobId: job?.id, job: job?.name, error: error.message });
  });
  return worker;
}

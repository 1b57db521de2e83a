import { DelayedError, UnrecoverableError, Worker, type Job } from "bullmq";
import { ZodError } from "zod";
import { failWithoutAttempt, retryDelayFor, type WorkKind } from "@mailhooks/delivery-state";
import { isInfrastructureError } from "@mailhooks/infrastructure-errors";
import { secretKeysOf, type DispatcherConfig } from "@mailhooks/config";
import { createKeyring, parseKeys, SecretDecryptionError } from "@mailhooks/secrets";
import { deliveryJob, JOB_NAMES, QUEUE_NAMES, replayJob, testDeliveryJob, DELIVERY_BACKOFF_TYPE, type RedisClient } from "@mailhooks/queue";
import { RetryableDeliveryError } from "./delivery/retry-policy.js";
import { deliverDestination, withDefaults, type DeliveryContext } from "./jobs/deliver-destination.js";
import { deliverTestEvent } from "./jobs/deliver-test-event.js";
import { replayEvent } from "./jobs/replay-event.js";

export interface DeliveryWorkerOptions {
  connection: RedisClient;
  prefix: string;
  concurrency: number;
  /** How long a job's lock lasts without renewal, in ms: a killed dispatcher's jobs are taken
   * over by another one within about this plus two stalled-job checks. */
  lockDurationMs?: number;
  /** How often stalled jobs are looked for, in ms. */
  stalledIntervalMs?: number;
  /** How many times an attempt that PostgreSQL or Redis kept from running is postponed. */
  maxPostpones?: number;
}

/** The start of the failedReason of a job given up after `maxPostpones` outages: its work is
 * still pending, and the sweeper queues it again once the outage is over. */
export const POSTPONED_MARK = "postponed too often:";
/** The start of the failedReason of a job that failed for good (a bug, a constraint). */
export const POISONED_MARK = "failed for good:";

/**
 * How many times a job may be taken over from a dispatcher that died while running it before its
 * work ends `failed` with an internal_error row. A dispatcher that dies (killed, out of memory,
 * its host gone) takes every job it was running with it, most of them other accounts' work that
 * did nothing wrong, so a takeover is no reason to end work: only a job that keeps killing every
 * dispatcher that runs it (a poison job) should end, and bounded memory makes that unlikely.
 */
export const MAX_STALLED_COUNT = 100;

/** Delay before a job postponed by an infrastructure error runs again: 1 s doubling to 30 s. */
export function postponeDelayMs(postponedBefore: number): number {
  return Math.min(30_000, 1_000 * 2 ** Math.max(0, postponedBefore));
}

/** The unit of work a job is about, from its (unchecked) data; null when it names none. */
function workOf(job: Job): { kind: WorkKind; id: string } | null {
  const data = (job.data ?? {}) as Record<string, unknown>;
  const id = job.name === JOB_NAMES.delivery ? data.destinationId : job.name === JOB_NAMES.replay ? data.replayId : data.testDeliveryId;
  if (typeof id !== "string") return null;
  return { kind: job.name as WorkKind, id };
}

/**
 * The BullMQ worker of the deliveries queue. Thin: it parses each job's data with the job's own
 * schema and calls one function. Retry timing is the custom backoff strategy below. Errors are
 * sorted by one rule:
 * - a failed delivery with a retry left (RetryableDeliveryError) uses up an attempt: BullMQ
 *   schedules the retry;
 * - PostgreSQL or Redis unreachable (isInfrastructureError, the API's classifier too), or a
 *   secret that no configured key decrypts, postpones the job without using up an attempt, at
 *   most `maxPostpones` times (then the job fails with POSTPONED_MARK and the sweeper queues the
 *   still-pending work again later);
 * - anything else is a poison job: logged with its id, counted, its work ended `failed` with a
 *   delivery row (a replay: and its audit entry) whose `error` is `internal_error` (CONTRACT.md
 *   section 8), and the job failed for good: it never sends again. So does a job taken over more
 *   than MAX_STALLED_COUNT times.
 */
export function createDeliveryWorker(context: DeliveryContext, options: DeliveryWorkerOptions): Worker {
  const ctx = withDefaults(context);
  const maxPostpones = options.maxPostpones ?? 20;
  const run = async (job: Job) => {
    switch (job.name) {
      case JOB_NAMES.delivery: {
        const { destinationId, firstAttempt = 0 } = deliveryJob.schema.parse(job.data);
        return deliverDestination(ctx, destinationId, firstAttempt + job.attemptsMade);
      }
      case JOB_NAMES.testDelivery:
        return deliverTestEvent(ctx, testDeliveryJob.schema.parse(job.data).testDeliveryId);
      case JOB_NAMES.replay:
        return replayEvent(ctx, replayJob.schema.parse(job.data).replayId);
      default:
        throw new UnrecoverableError(`${POISONED_MARK} unknown job ${job.name}`);
    }
  };

  const giveUp = async (job: Job, reason: string, error: unknown) => {
    ctx.logger.error("job failed for good", { jobId: job.id, job: job.name, reason, error: (error as Error)?.message });
    ctx.metrics.jobsFailed.inc({ job: job.name, reason });
    const work = workOf(job);
    if (work) {
      // If this fails (PostgreSQL away), the work stays pending behind a failed job: the sweeper
      // ends it later (it treats a failed job as finished, not alive).
      await failWithoutAttempt(ctx.pool, work.kind, work.id).catch((end: Error) =>
        ctx.logger.error("could not end the work of a failed job; the sweeper will", { jobId: job.id, job: job.name, error: end.message }),
      );
    }
  };

  const processor = async (job: Job, token?: string) => {
    try {
      return await run(job);
    } catch (error) {
      if (error instanceof RetryableDeliveryError || error instanceof DelayedError) throw error;
      if (error instanceof UnrecoverableError || error instanceof ZodError) {
        await giveUp(job, "invalid_job", error);
        throw new UnrecoverableError(`${POISONED_MARK} ${(error as Error).message}`);
      }
      // A secret no key of SECRET_ENCRYPTION_KEYS opens is the operator's to fix (a key dropped too
      // early): the work waits like an outage instead of failing for good.
      if (isInfrastructureError(error) || error instanceof SecretDecryptionError) {
        const postponedBefore = Math.max(0, job.attemptsStarted - job.attemptsMade - 1);
        if (postponedBefore < maxPostpones) {
          const delay = postponeDelayMs(postponedBefore);
          ctx.logger.warn("attempt postponed", { jobId: job.id, job: job.name, delayMs: delay, error: (error as Error).message });
          ctx.metrics.postponed.inc({ job: job.name });
          await job.moveToDelayed(Date.now() + delay, token);
          throw new DelayedError();
        }
        ctx.logger.error("attempt postponed too often; the sweeper queues it again after the outage", { jobId: job.id, job: job.name });
        ctx.metrics.jobsFailed.inc({ job: job.name, reason: "postponed_too_often" });
        throw new UnrecoverableError(`${POSTPONED_MARK} ${(error as Error).message}`);
      }
      await giveUp(job, "error", error);
      throw new UnrecoverableError(`${POISONED_MARK} ${(error as Error)?.message}`);
    }
  };

  const worker = new Worker(QUEUE_NAMES.deliveries, processor, {
    connection: options.connection,
    prefix: options.prefix,
    concurrency: options.concurrency,
    lockDuration: options.lockDurationMs ?? 15_000,
    stalledInterval: options.stalledIntervalMs ?? 5_000,
    // A job whose dispatcher died is taken over; only one that keeps killing dispatchers ends.
    maxStalledCount: MAX_STALLED_COUNT,
    settings: {
      backoffStrategy: (attemptsMade, type, _error, job) => {
        if (type !== DELIVERY_BACKOFF_TYPE) return -1;
        const firstAttempt = (job?.data as { firstAttempt?: number } | undefined)?.firstAttempt ?? 0;
        return retryDelayFor(ctx.retryDelaysMs, firstAttempt + attemptsMade);
      },
    },
  });
  worker.on("error", (error) => ctx.logger.error("worker error", { error: error.message }));
  worker.on("stalled", (jobId) => {
    ctx.logger.info("job taken over from a dispatcher that stopped renewing its lock", { jobId });
    ctx.metrics.stalledJobs.inc();
  });
  worker.on("failed", (job, error) => {
    // BullMQ fails a job itself when it stalled more than maxStalledCount times.
    if (job && /stalled more than allowable limit/i.test(error.message)) void giveUp(job, "stalled", error);
  });
  return worker;
}

/**
 * The delivery worker of a dispatcher configured by `config` (apps/dispatcher/src/main.ts, and
 * the tests' in-process dispatchers): which settings feed the deliveries (retry delays, private
 * targets, secret keys, auto-disable) and the worker (concurrency, lock, stalled checks,
 * postpones) is written here once.
 */
export function createConfiguredDeliveryWorker(
  config: DispatcherConfig,
  wiring: Pick<DeliveryContext, "pool" | "client" | "logger" | "metrics"> & Pick<DeliveryWorkerOptions, "connection" | "prefix">,
): Worker {
  return createDeliveryWorker(
    {
      pool: wiring.pool,
      client: wiring.client,
      logger: wiring.logger,
      metrics: wiring.metrics,
      allowPrivateTargets: config.ALLOW_PRIVATE_TARGETS,
      retryDelaysMs: config.DELIVERY_RETRY_DELAYS_MS,
      keyring: createKeyring(parseKeys(secretKeysOf(config))),
      autoDisableAfterMs: config.WEBHOOK_AUTO_DISABLE_AFTER_HOURS * 3_600_000,
    },
    {
      connection: wiring.connection,
      prefix: wiring.prefix,
      concurrency: config.DISPATCHER_CONCURRENCY,
      lockDurationMs: config.DISPATCHER_LOCK_DURATION_MS,
      stalledIntervalMs: config.DISPATCHER_STALLED_INTERVAL_MS,
      maxPostpones: config.DISPATCHER_MAX_POSTPONES,
    },
  );
}

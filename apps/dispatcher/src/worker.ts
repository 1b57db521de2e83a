import { DelayedError, Job, UnrecoverableError, Worker } from "bullmq";
import { ZodError } from "zod";
import { decideAfterAttempt, failWithoutAttempt, type WorkKind } from "@mailhooks/delivery-state";
import { isInfrastructureError } from "@mailhooks/infrastructure-errors";
import { secretKeysOf, type DispatcherConfig } from "@mailhooks/config";
import { createKeyring, parseKeys, SecretDecryptionError } from "@mailhooks/secrets";
import {
  deliveryAttemptNumber,
  isWorkJobName,
  QUEUE_NAMES,
  runWorkJob,
  workIdOf,
  DELIVERY_BACKOFF_TYPE,
  type RedisClient,
} from "@mailhooks/queue";
import { workerSlots, type AdmissionControl, type RateLimits } from "@mailhooks/scheduler";
import { RetryableDeliveryError } from "./delivery/retry-policy.js";
import { withDefaults, type DeliveryContext } from "./jobs/deliver-destination.js";
import { workJobHandlers } from "./jobs/handlers.js";
import { startWorkerScheduler } from "./scheduler.js";

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
  /** The fair scheduler (packages/scheduler): without it every attempt starts at once. */
  scheduler?: WorkerScheduler;
}

/**
 * What the worker asks of the fair scheduler (docs/scheduler.md): whether an attempt may start
 * (its webhook's and account's share, its rate_limit), that it ended, and that a job's work
 * ended so that its webhook's lease is released (fire and forget: a lease not there yet is looked
 * for again LATE_LEASE_RELEASE_MS later, and the lease keeper drops a lease whose release was lost),
 * and that a lease ended (the relay is woken if it held work back).
 */
export interface WorkerScheduler {
  admission: AdmissionControl;
  rateLimits: RateLimits;
  releaseLease: (workId: string) => void;
  roomMade: () => void;
}

/** The webhook and account of a job, from its (unchecked) data; null for jobs relayed without them. */
function ownerOf(job: Job): { webhookId: string; accountId: string } | null {
  const data = (job.data ?? {}) as Record<string, unknown>;
  return typeof data.webhookId === "string" && typeof data.accountId === "string"
    ? { webhookId: data.webhookId, accountId: data.accountId }
    : null;
}

/** The start of the failedReason of a job given up after `maxPostpones` outages, for people:
 * its work is still pending, and the sweeper queues it again once the outage is over. */
export const POSTPONED_MARK = "postponed too often:";
/**
 * What the sweeper reads (never the failedReason's text): the job's data field `gaveUp` is
 * POSTPONED_TOO_OFTEN when it was given up after `maxPostpones` outages.
 */
export const POSTPONED_TOO_OFTEN = "postponed_too_often";
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

/** The unit of work a job is about, from its (unchecked) data; null for a job of no known kind or naming none. */
function workOf(job: Job): { kind: WorkKind; id: string } | null {
  if (!isWorkJobName(job.name)) return null;
  const id = workIdOf(job.name, job.data);
  return id === null ? null : { kind: job.name, id };
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
 *   delivery row (a replay: and its audit entry) whose `error` is `internal_error` (docs/api.md,
 *   "Deliveries log"), and the job failed for good: it never sends again. So does a job taken over more
 *   than MAX_STALLED_COUNT times.
 */
export function createDeliveryWorker(context: DeliveryContext, options: DeliveryWorkerOptions): Worker {
  const ctx = withDefaults(context);
  const maxPostpones = options.maxPostpones ?? 20;
  const handlers = workJobHandlers(ctx);
  /** The job's handler, its data parsed by its schema (a ZodError otherwise). */
  const run = async (job: Job) => {
    if (!isWorkJobName(job.name)) throw new UnrecoverableError(`${POISONED_MARK} unknown job ${job.name}`);
    return runWorkJob(handlers, job.name, job.data, job);
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

  /** One attempt of `job`, its errors sorted by the rule above. */
  const attempt = async (job: Job, token?: string) => {
    try {
      return await run(job);
    } catch (error) {
      if (error instanceof RetryableDeliveryError || error instanceof DelayedError) throw error;
      if (error instanceof UnrecoverableError || error instanceof ZodError) {
        await giveUp(job, "invalid_job", error);
        throw new UnrecoverableError(`${POISONED_MARK} ${error.message}`);
      }
      // A secret no key of SECRET_ENCRYPTION_KEYS opens is the operator's to fix (a key dropped too
      // early): the work waits like an outage instead of failing for good.
      if (isInfrastructureError(error) || error instanceof SecretDecryptionError) {
        // Counted in the job's data: a job also comes back without an attempt when the scheduler
        // held it back, which must not use up its postpones.
        const postpones = (job.data as { postpones?: unknown } | undefined)?.postpones;
        const postponedBefore = typeof postpones === "number" ? postpones : 0;
        if (postponedBefore < maxPostpones) {
          const delay = postponeDelayMs(postponedBefore);
          ctx.logger.warn("attempt postponed", { jobId: job.id, job: job.name, delayMs: delay, error: (error as Error).message });
          ctx.metrics.postponed.inc({ job: job.name });
          await job.updateData({ ...(job.data as object), postpones: postponedBefore + 1 });
          await job.moveToDelayed(Date.now() + delay, token);
          throw new DelayedError();
        }
        ctx.logger.error("attempt postponed too often; the sweeper queues it again after the outage", { jobId: job.id, job: job.name });
        ctx.metrics.jobsFailed.inc({ job: job.name, reason: POSTPONED_TOO_OFTEN });
        await job.updateData({ ...(job.data as object), gaveUp: POSTPONED_TOO_OFTEN });
        throw new UnrecoverableError(`${POSTPONED_MARK} ${(error as Error).message}`);
      }
      await giveUp(job, "error", error);
      throw new UnrecoverableError(`${POISONED_MARK} ${(error as Error)?.message}`);
    }
  };

  const scheduler = options.scheduler;
  /**
   * Asks the scheduler before the attempt: a job held back waits in the delayed set until the
   * time it was given, without using an attempt. When the attempt's work ends (no retry follows:
   * delivered, failed, cancelled, or failed for good), its webhook's lease is released, unless
   * the handler says the statement that ended the work ended the lease too. BullMQ keeps no
   * return value.
   */
  const processor = async (job: Job, token?: string) => {
    const owner = scheduler ? ownerOf(job) : null;
    if (!scheduler || !owner || !job.id) {
      await attempt(job, token);
      return;
    }
    const ticket = { jobId: job.id, ...owner };
    const holds = Math.max(0, job.attemptsStarted - job.attemptsMade - 1);
    const decision = await scheduler.rateLimits
      .get(owner.webhookId)
      .then((rateLimit) => scheduler.admission.admit({ ...ticket, holds, rateLimit }))
      // Redis trouble: the attempt goes ahead (BullMQ itself needs Redis to go on anyway).
      .catch(
        (error: Error) => (
          ctx.logger.warn("scheduler unavailable; attempt admitted", { jobId: job.id, error: error.message }),
          { admitted: true as const }
        ),
      );
    if (!decision.admitted) {
      ctx.metrics.held.inc({ reason: decision.reason });
      await job.moveToDelayed(Math.max(decision.retryAt, Date.now() + 1), token);
      throw new DelayedError();
    }
    const started = performance.now();
    let leaseLeft = false;
    try {
      const result = await attempt(job, token);
      leaseLeft = !result?.leaseReleased;
      if (result?.leaseReleased) scheduler.roomMade();
    } catch (error) {
      leaseLeft = error instanceof UnrecoverableError;
      throw error;
    } finally {
      if (leaseLeft) scheduler.releaseLease(job.id);
      await scheduler.admission
        .release({ ...ticket, durationMs: performance.now() - started })
        .catch((error: Error) =>
          ctx.logger.warn("could not release a scheduler slot; it expires", { jobId: job.id, error: error.message }),
        );
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
        // `attemptsMade` counts the attempt that just failed.
        const failed = deliveryAttemptNumber((job?.data ?? {}) as { firstAttempt?: number }, attemptsMade - 1);
        const next = decideAfterAttempt(ctx.retryDelaysMs, failed, "failed", new Date());
        return next.next === "retry" ? next.delayMs : -1;
      },
    },
  });
  worker.on("error", (error) => ctx.logger.error("worker error", { error: error.message }));
  worker.on("stalled", (jobId) => {
    ctx.logger.info("job taken over from a dispatcher that stopped renewing its lock", { jobId });
    ctx.metrics.stalledJobs.inc();
  });
  worker.on("failed", (job, error) => {
    // BullMQ fails a job itself, without running it, once it stalled more than maxStalledCount
    // times: its stalledCounter says so (the processor's own failures come with fewer stalls).
    if (job && job.stalledCounter > MAX_STALLED_COUNT) void giveUp(job, "stalled", error);
  });
  return worker;
}

/**
 * The delivery worker of a dispatcher configured by `config` (apps/dispatcher/src/main.ts, and
 * the tests' in-process dispatchers): which settings feed the deliveries (retry delays, private
 * targets, secret keys, auto-disable), the worker (concurrency, lock, stalled checks, postpones)
 * and its fair scheduler (docs/scheduler.md: admission, rate limits, lease releases,
 * the lease keeper and the scheduler's review, stopped when the worker closes) is written
 * here once.
 */
export function createConfiguredDeliveryWorker(
  config: DispatcherConfig,
  wiring: Pick<DeliveryContext, "pool" | "client" | "logger" | "metrics"> &
    Pick<DeliveryWorkerOptions, "connection" | "prefix"> & {
      queuePrefix?: string;
      /** Called when leases ended: wakes the relay of this process if it held work back (Relay.room). */
      onRoom?: () => void;
    },
): Worker {
  const scheduler = startWorkerScheduler(config, { ...wiring, queuePrefix: wiring.queuePrefix ?? config.QUEUE_PREFIX });
  const worker = createDeliveryWorker(
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
      // The reserve runs on top of the configured slots, and more slots fetch (docs/scheduler.md).
      concurrency: workerSlots(config.DISPATCHER_CONCURRENCY),
      lockDurationMs: config.DISPATCHER_LOCK_DURATION_MS,
      stalledIntervalMs: config.DISPATCHER_STALLED_INTERVAL_MS,
      maxPostpones: config.DISPATCHER_MAX_POSTPONES,
      scheduler,
    },
  );
  scheduler.wakeHeldJobs((jobId) => Job.fromId(worker, jobId).then((job) => job?.promote()));
  worker.on("closing", () => scheduler.stop());
  return worker;
}

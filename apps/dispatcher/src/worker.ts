import { Worker, type Job } from "bullmq";
import { failWithoutAttempt, releaseWork, type LeasedWork } from "@mailhooks/delivery-state";
import { isInfrastructureError } from "@mailhooks/infrastructure-errors";
import { secretKeysOf, type DispatcherConfig } from "@mailhooks/config";
import { createKeyring, parseKeys, SecretDecryptionError } from "@mailhooks/secrets";
import { isWorkJobName, QUEUE_NAMES, workJobSchema, type RedisClient } from "@mailhooks/queue";
import { createPool } from "@mailhooks/db";
import { BATCHES_IN_FLIGHT, withDefaults, type DeliveryContext } from "./jobs/deliver-destination.js";
import { workJobHandlers } from "./jobs/handlers.js";
import { reserveSlots } from "./relay.js";

/**
 * How long work whose webhook's secret no key of SECRET_ENCRYPTION_KEYS opens waits before it is
 * claimed again, in ms: the operator's to fix (a key dropped too early), so it waits without
 * using an attempt, asking again at this pace rather than at every claim.
 */
export const UNREADABLE_SECRET_WAIT_MS = 60_000;

export interface DeliveryWorkerOptions {
  connection: RedisClient;
  prefix: string;
  /** Attempts this worker runs at once: the dispatcher's slots (DISPATCHER_CONCURRENCY) and, in the reserve's lane, its reserve slots. */
  slots: number;
  reserve: number;
  /** Called whenever a job's work ended here (its slot is free: the relay may claim). */
  onEnded?: () => void;
}

/** The deliveries workers (one per lane) and the leases of what they run now (the relay's heartbeat renews them). */
export interface DeliveryWorker {
  running: () => LeasedWork[];
  /** Takes no more jobs and resolves once the attempts running have ended (BullMQ Worker.close). */
  close: () => Promise<void>;
}

/**
 * The BullMQ workers of the deliveries queues (docs/scheduler.md): one for the slots' lane, running
 * `slots` attempts at once, and one for the reserve's lane, running `reserve`. Thin: every job they
 * are given was claimed for them, so they run every one, its data parsed by the job schema, through the handler of
 * its kind. A job of another shape (left in Redis by an earlier version: its work is in the work
 * queue and is claimed again) is dropped unread. What an attempt meets is sorted by one rule:
 * - PostgreSQL or Redis unreachable before the attempt (isInfrastructureError): nothing is sent
 *   and nothing written; the work's lease lapses and the work is claimed again. After the attempt,
 *   its outcome is kept and its record tried again until PostgreSQL takes it (the handlers), so a
 *   response is never sent twice because only its record failed;
 * - a secret no configured key opens: the work waits UNREADABLE_SECRET_WAIT_MS without using an
 *   attempt, and is claimed again;
 * - anything else is a poison job: logged, counted, its work ended `failed` with a delivery row
 *   (a replay: and its audit entry) whose `error` is `internal_error`: it never sends again.
 * A job BullMQ finds stalled (its process stopped renewing its lock) fails without running again:
 * the work's lease is what brings it back.
 */
export function createDeliveryWorker(context: DeliveryContext, options: DeliveryWorkerOptions): DeliveryWorker {
  const ctx = withDefaults(context);
  const handlers = workJobHandlers(ctx);
  const running = new Map<string, LeasedWork>();

  const processor = async (job: Job) => {
    const data = workJobSchema.safeParse(job.data);
    if (!isWorkJobName(job.name) || !data.success) {
      ctx.logger.info("a job of another shape dropped (its work, if any, is in the work queue)", { jobId: job.id, job: job.name });
      return;
    }
    const work = data.data;
    const key = `${work.workId}-${work.lease}`;
    running.set(key, work);
    try {
      await handlers[job.name](work);
    } catch (error) {
      if (isInfrastructureError(error)) {
        ctx.logger.warn("attempt not made: PostgreSQL or Redis unreachable; its lease lapses and it is claimed again", {
          jobId: job.id,
          error: (error as Error).message,
        });
        ctx.metrics.postponed.inc({ job: job.name });
      } else if (error instanceof SecretDecryptionError) {
        ctx.logger.error("a webhook secret no key of SECRET_ENCRYPTION_KEYS opens; the work waits", { jobId: job.id });
        ctx.metrics.postponed.inc({ job: job.name });
        await releaseWork(ctx.pool, [work], UNREADABLE_SECRET_WAIT_MS).catch(() => undefined);
      } else {
        ctx.logger.error("job failed for good", { jobId: job.id, job: job.name, error: (error as Error)?.message });
        ctx.metrics.jobsFailed.inc({ job: job.name, reason: "error" });
        // Should this fail too (PostgreSQL away), the lease lapses and the job runs again.
        await failWithoutAttempt(ctx.pool, job.name, work.workId).catch((end: Error) =>
          ctx.logger.error("could not end the work of a failed job", { jobId: job.id, error: end.message }),
        );
      }
    } finally {
      running.delete(key);
      options.onEnded?.();
    }
  };

  const lanes = [
    [QUEUE_NAMES.deliveries, options.slots],
    [QUEUE_NAMES.reserveDeliveries, options.reserve],
  ] as const;
  const workers = lanes.map(([queue, concurrency]) => {
    const worker = new Worker(queue, processor, {
      connection: options.connection,
      prefix: options.prefix,
      concurrency,
      // The work's lease in PostgreSQL is what recovers work whose dispatcher died; a job BullMQ
      // finds stalled is not run a second time beside the lease's recovery.
      maxStalledCount: 0,
    });
    worker.on("error", (error) => ctx.logger.error("worker error", { error: error.message, queue }));
    return worker;
  });
  return {
    running: () => [...running.values()],
    close: async () => {
      await Promise.all(workers.map((worker) => worker.close()));
    },
  };
}

/**
 * The delivery worker of a dispatcher configured by `config` (apps/dispatcher/src/main.ts, and
 * the tests' in-process dispatchers): which settings feed the deliveries (retry delays, private
 * targets, secret keys, auto-disable) and the workers (slots and reserve) is written here once.
 * The loads get connections of their own, which keep their statements' generic plans (see
 * DeliveryContext.loadPool); `close` ends them.
 */
export function createConfiguredDeliveryWorker(
  config: DispatcherConfig,
  wiring: Pick<DeliveryContext, "pool" | "client" | "logger" | "metrics"> &
    Pick<DeliveryWorkerOptions, "connection" | "prefix" | "onEnded">,
): DeliveryWorker {
  const loadPool = createPool(config.DATABASE_URL, BATCHES_IN_FLIGHT, {
    statementTimeoutMs: config.DATABASE_STATEMENT_TIMEOUT_MS,
    genericPlans: true,
  });
  const worker = createDeliveryWorker(
    {
      pool: wiring.pool,
      loadPool,
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
      slots: config.DISPATCHER_CONCURRENCY,
      reserve: reserveSlots(config.DISPATCHER_CONCURRENCY),
      onEnded: wiring.onEnded,
    },
  );
  return {
    running: worker.running,
    close: async () => {
      await worker.close();
      await loadPool.end();
    },
  };
}

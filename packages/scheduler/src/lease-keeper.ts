import type pg from "pg";
import { dropLeases, leasesAfter } from "@mailhooks/delivery-state";
import { QUEUE_NAMES, type RedisClient } from "@mailhooks/queue";

/**
 * The lease keeper (docs/scheduler.md, "Crash-safe bookkeeping"): a lease lives in PostgreSQL
 * while its job lives in Redis. A job's lease ends with its work (the worker releases it); when
 * that release was lost (a dispatcher killed at that moment, PostgreSQL away) or the job itself
 * was (a Redis flush, a failover), the webhook would go on believing it holds that job. So every
 * dispatcher walks its deployment's leases older than `graceMs` in turn, `batchSize` at a time,
 * asks Redis whether each job still exists and has not finished, and drops the leases whose job
 * does not (the relays are woken: the webhook's waiting work goes on).
 */
export interface LeaseKeeperOptions {
  pool: pg.Pool;
  redis: RedisClient;
  /** The deployment's Redis key prefix. */
  keyPrefix: string;
  /** QUEUE_PREFIX: the deployment's rows. */
  queuePrefix: string;
  /** How often to look, in ms (DISPATCHER_STALLED_INTERVAL_MS). */
  intervalMs: number;
  /** Leases younger than this, in ms, are left alone (their job may still be on its way to Redis). */
  graceMs?: number;
  batchSize?: number;
  /** Called with the number of leases dropped by a pass, when it dropped any. */
  onDropped?: (count: number) => void;
  onError?: (error: Error) => void;
}

/** One pass over the leases: returns how many were dropped. */
export async function keepLeases(options: Omit<LeaseKeeperOptions, "intervalMs">): Promise<number> {
  const graceMs = options.graceMs ?? 5_000;
  const batchSize = options.batchSize ?? 500;
  let after = "";
  let dropped = 0;
  for (;;) {
    const leases = await leasesAfter(options.pool, options.queuePrefix, after, graceMs, batchSize);
    if (leases.length === 0) return dropped;
    const pipeline = options.redis.pipeline();
    for (const lease of leases) pipeline.hmget(`${options.keyPrefix}:${QUEUE_NAMES.deliveries}:${lease.workId}`, "timestamp", "finishedOn");
    const answers = (await pipeline.exec()) ?? [];
    const gone = leases.filter((_, i) => {
      const [error, fields] = answers[i] ?? [new Error("no answer"), null];
      if (error) return false;
      const [timestamp, finishedOn] = fields as (string | null)[];
      return timestamp === null || finishedOn !== null;
    });
    dropped += await dropLeases(
      options.pool,
      gone.map((l) => l.workId),
      graceMs,
    );
    if (leases.length < batchSize) return dropped;
    after = leases[leases.length - 1].workId;
  }
}

/**
 * Runs keepLeases every `intervalMs` until closed. A tick while a pass is still running (Redis or
 * PostgreSQL slow or hung) is skipped: passes never queue up behind one another.
 */
export function startLeaseKeeper(options: LeaseKeeperOptions): { close: () => Promise<void> } {
  let running: Promise<void> | null = null;
  const timer = setInterval(() => {
    if (running) return;
    running = (async () => {
      try {
        const dropped = await keepLeases(options);
        if (dropped > 0) options.onDropped?.(dropped);
      } catch (error) {
        options.onError?.(error as Error);
      } finally {
        running = null;
      }
    })();
  }, options.intervalMs);
  timer.unref();
  return {
    close: async () => {
      clearInterval(timer);
      await running;
    },
  };
}

import type pg from "pg";
import { dropLeases, leasesAfter } from "@mailhooks/delivery-state";
import { QUEUE_NAMES, type RedisClient } from "@mailhooks/queue";

/**
 * The lease keeper (docs/scheduler.md, "Crash-safe bookkeeping"): a lease lives in PostgreSQL
 * while its job lives in Redis. A job's lease ends with its work (the worker releases it); when
 * that release was lost (a dispatcher killed at that moment, PostgreSQL away) or the job itself
 * was (a Redis flush, a failover), the webhook would go on believing it holds that job. So the
 * dispatchers walk the deployment's leases older than `graceMs`, `batchSize` at a time, ask Redis
 * whether each job still exists and has not finished, and drop the leases whose job does not
 * (the relays are woken: the webhook's waiting work goes on).
 *
 * The walk is bounded: a pass checks at most `maxLivePerPass` leases whose job still lives, and
 * the next pass, of this dispatcher or another, goes on where it stopped (a cursor in Redis). So a
 * deployment with any number of leases costs each dispatcher at most that many Redis reads and
 * about that many rows per interval; a pass that keeps finding lost leases (after a flush) goes
 * on, since each of those checks frees work.
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
  /** Leases read and checked at a time (one query, one Redis pipeline). */
  batchSize?: number;
  /** A pass ends once it has checked this many leases whose job lives (default 4,000). */
  maxLivePerPass?: number;
  /** Called with the number of leases dropped by a pass, when it dropped any. */
  onDropped?: (count: number) => void;
  onError?: (error: Error) => void;
}

/** What one pass did. */
export interface LeasePass {
  dropped: number;
  /** Leases checked against Redis. */
  checked: number;
  /** Where the next pass starts: the last work id checked, or "" once the walk reached the end. */
  next: string;
}

/** The Redis key that holds where the deployment's lease walk goes on. */
export function leaseWalkKey(keyPrefix: string): string {
  return `${keyPrefix}:scheduler:lease-walk`;
}

/**
 * One pass over the leases, from the walk's cursor in Redis (or the start), leaving the cursor
 * where it stopped. Throws what PostgreSQL or Redis throws (the next tick tries again).
 */
export async function keepLeases(options: Omit<LeaseKeeperOptions, "intervalMs">): Promise<LeasePass> {
  const graceMs = options.graceMs ?? 5_000;
  const batchSize = options.batchSize ?? 500;
  const jobKey = (workId: string) => `${options.keyPrefix}:${QUEUE_NAMES.deliveries}:${workId}`;
  let budget = options.maxLivePerPass ?? 4_000;
  let after = (await options.redis.get(leaseWalkKey(options.keyPrefix))) ?? "";
  const pass: LeasePass = { dropped: 0, checked: 0, next: "" };
  while (budget > 0) {
    const limit = Math.min(batchSize, budget);
    const leases = await leasesAfter(options.pool, options.queuePrefix, after, graceMs, limit);
    if (leases.length === 0) {
      after = "";
      break;
    }
    const pipeline = options.redis.pipeline();
    for (const lease of leases) pipeline.hmget(jobKey(lease.workId), "timestamp", "finishedOn");
    const answers = (await pipeline.exec()) ?? [];
    const gone = leases.filter((_, i) => {
      const [error, fields] = answers[i] ?? [new Error("no answer"), null];
      if (error) return false;
      const [timestamp, finishedOn] = fields as (string | null)[];
      return timestamp === null || finishedOn !== null;
    });
    pass.dropped += await dropLeases(
      options.pool,
      gone.map((l) => l.workId),
      graceMs,
    );
    pass.checked += leases.length;
    budget -= leases.length - gone.length;
    if (leases.length < limit) {
      after = "";
      break;
    }
    after = leases[leases.length - 1].workId;
  }
  pass.next = after;
  // Another dispatcher's pass may have moved the cursor meanwhile: at worst a stretch is walked
  // twice or skipped until the walk comes round again.
  if (after === "") await options.redis.del(leaseWalkKey(options.keyPrefix));
  else await options.redis.set(leaseWalkKey(options.keyPrefix), after);
  return pass;
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
        const { dropped } = await keepLeases(options);
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

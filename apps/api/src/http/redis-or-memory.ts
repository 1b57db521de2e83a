import { isInfrastructureError } from "@mailhooks/infrastructure-errors";
import type { RedisClient } from "@mailhooks/queue";

/**
 * Where a limiter counts: in Redis (shared by the replicas) while it answers promptly, else in this
 * process's memory. A Redis that is not connected is skipped at once. A Redis that is connected
 * but hangs (frozen, swapping, a half-open link: its connection stays "ready") would hold every
 * request for ioredis's command timeout (5 s), so a limiter's command gets `timeoutMs` of its own;
 * past it, or on any infrastructure error, the limiter counts in memory for `pauseMs` without
 * asking Redis, then one request at a time tries Redis again (the others still count in memory)
 * until one succeeds. A frozen Redis thus costs one request `timeoutMs` per `pauseMs`, not each.
 * An error that is not infrastructure (a bug) is thrown, unless `anyError`.
 */
export interface RedisOrMemory {
  /** `viaRedis()` when Redis is usable and answers within the timeout, else `viaMemory()`. */
  run<T>(viaRedis: () => Promise<T>, viaMemory: () => T | Promise<T>): Promise<T>;
}

export interface RedisOrMemoryOptions {
  /** How long a limiter's command may take, in ms (RATE_LIMIT_REDIS_TIMEOUT_MS). */
  timeoutMs: number;
  /** How long memory is used after a time-out or an outage before Redis is tried again, in ms. */
  pauseMs?: number;
  /** Count in memory on any error of Redis, not only infrastructure errors (then nothing is thrown). */
  anyError?: boolean;
  /** The clock, in ms; Date.now by default. */
  now?: () => number;
}

/** Default of RedisOrMemoryOptions.pauseMs. */
export const REDIS_PAUSE_MS = 5_000;

const TIMED_OUT = Symbol("timed out");

export function redisOrMemory(redis: RedisClient | undefined, options: RedisOrMemoryOptions): RedisOrMemory {
  const clock = options.now ?? Date.now;
  const pauseMs = options.pauseMs ?? REDIS_PAUSE_MS;
  /** Until when memory is used without asking Redis; 0 while Redis answers. */
  let pausedUntil = 0;
  /** A request is trying Redis again after a pause. */
  let probing = false;

  const withTimeout = <T>(promise: Promise<T>): Promise<T | typeof TIMED_OUT> => {
    let timer: NodeJS.Timeout | undefined;
    // The command's own later rejection (ioredis's timeout) must not be unhandled.
    promise.catch(() => undefined);
    return Promise.race([
      promise,
      new Promise<typeof TIMED_OUT>((resolve) => (timer = setTimeout(() => resolve(TIMED_OUT), options.timeoutMs))),
    ]).finally(() => clearTimeout(timer));
  };

  return {
    async run(viaRedis, viaMemory) {
      if (!redis || redis.status !== "ready") return viaMemory();
      const recovering = pausedUntil !== 0;
      if (recovering && (clock() < pausedUntil || probing)) return viaMemory();
      if (recovering) probing = true;
      try {
        const result = await withTimeout(viaRedis());
        if (result !== TIMED_OUT) {
          pausedUntil = 0;
          return result;
        }
      } catch (error) {
        if (!options.anyError && !isInfrastructureError(error)) throw error;
      } finally {
        if (recovering) probing = false;
      }
      pausedUntil = clock() + pauseMs;
      return viaMemory();
    },
  };
}

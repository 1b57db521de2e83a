import type { RedisClient } from "@mailhooks/queue";

/**
 * Limits attempts that may fail (requests without a valid API key, operator sign-ins) per client
 * address: at most `limit` in any rolling window of `windowMs` (a sliding window approximated
 * from two fixed ones, so a burst at a window's edge does not get twice the allowance). An
 * attempt reserves its place before the costly check (`reserve`), so however many arrive at once,
 * no more than `limit` get through; an attempt that turns out valid gives its place back
 * (`release`). Shared by every API replica through Redis; while Redis is unreachable each process
 * counts on its own, in memory, so a flood still costs no PostgreSQL query.
 */
export interface FailureLimiter {
  /** Takes a place for `address`: 0 when it may go on, else the seconds until it may try again. */
  reserve(address: string): Promise<number>;
  /** Gives back the place of an attempt that succeeded. */
  release(address: string): Promise<void>;
}

export interface FailureLimiterOptions {
  /** Redis shared by the replicas; omitted: memory only (one process). */
  redis?: RedisClient;
  /** Key prefix in Redis (e.g. `<QUEUE_PREFIX>:authfail`). */
  keyPrefix: string;
  limit: number;
  windowMs: number;
}

export function createFailureLimiter(options: FailureLimiterOptions): FailureLimiter {
  const memory = new Map<string, number>();
  const windowOf = (now: number) => Math.floor(now / options.windowMs);
  const key = (address: string, window: number) => `${options.keyPrefix}:${window}:${address}`;
  const redisReady = () => options.redis?.status === "ready";

  /** Attempts in the rolling window: this window's, plus the previous one's still inside it. */
  const weighted = (now: number, current: number, previous: number) => {
    const elapsed = (now % options.windowMs) / options.windowMs;
    return current + previous * (1 - elapsed);
  };
  const retryAfter = (now: number) => Math.max(1, Math.ceil((options.windowMs - (now % options.windowMs)) / 1000));

  const counts = async (address: string, now: number, delta: number): Promise<[number, number]> => {
    const window = windowOf(now);
    if (redisReady()) {
      try {
        const replies = await options.redis!
          .multi()
          .incrby(key(address, window), delta)
          .pexpire(key(address, window), options.windowMs * 2)
          .get(key(address, window - 1))
          .exec();
        return [Number(replies?.[0]?.[1] ?? 0), Number(replies?.[2]?.[1] ?? 0)];
      } catch {
        // Redis went away mid-way: count in memory.
      }
    }
    const current = (memory.get(key(address, window)) ?? 0) + delta;
    memory.set(key(address, window), current);
    if (memory.size > 100_000) memory.clear();
    return [current, memory.get(key(address, window - 1)) ?? 0];
  };

  return {
    async reserve(address) {
      const now = Date.now();
      const [current, previous] = await counts(address, now, 1);
      return weighted(now, current, previous) > options.limit ? retryAfter(now) : 0;
    },
    async release(address) {
      await counts(address, Date.now(), -1);
    },
  };
}

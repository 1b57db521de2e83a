import type { RedisClient } from "@mailhooks/queue";
import { redisOrMemory } from "./redis-or-memory.js";
import { setNewest } from "@mailhooks/bounded-map";

/**
 * Limits attempts that may fail (requests without a valid API key, operator sign-ins) per client
 * address: at most `limit` in any rolling window of `windowMs` (a sliding window approximated
 * from two fixed ones, so a burst at a window's edge does not get twice the allowance). An
 * attempt reserves its place before the costly check (`reserve`), so however many arrive at once,
 * no more than `limit` get through; an attempt that turns out valid gives its place back
 * (`release`). Shared by every API replica through Redis; while Redis is unreachable, or hangs
 * past `redisTimeoutMs`, each process counts on its own, in memory (redis-or-memory.ts), so a
 * flood still costs no PostgreSQL query and a frozen Redis does not hold each request.
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
  /** How long one Redis command may take, in ms (RATE_LIMIT_REDIS_TIMEOUT_MS; 250 by default). */
  redisTimeoutMs?: number;
  /** The clock, in ms (tests move it); Date.now by default. */
  now?: () => number;
}

/** Addresses the in-memory counts keep per window; past it, the least recently counted go first. */
const MEMORY_ADDRESSES = 100_000;

/**
 * Counts per address of the current window and the previous one, in memory: older windows are
 * dropped whole, and a window holds at most MEMORY_ADDRESSES addresses, the least recently counted
 * leaving first (an LRU), so a flood of new addresses never resets the count of one that keeps
 * trying: to push it out, the others must all arrive between two of its attempts.
 */
function memoryCounts() {
  let window = Number.NaN;
  let current = new Map<string, number>();
  let previous = new Map<string, number>();
  return (address: string, at: number, delta: number): [number, number] => {
    if (at !== window) {
      previous = at === window + 1 ? current : new Map<string, number>();
      current = new Map();
      window = at;
    }
    const count = (current.get(address) ?? 0) + delta;
    setNewest(current, address, count, MEMORY_ADDRESSES);
    return [count, previous.get(address) ?? 0];
  };
}

export function createFailureLimiter(options: FailureLimiterOptions): FailureLimiter {
  const memory = memoryCounts();
  const clock = options.now ?? Date.now;
  const windowOf = (now: number) => Math.floor(now / options.windowMs);
  const key = (address: string, window: number) => `${options.keyPrefix}:${window}:${address}`;
  const where = redisOrMemory(options.redis, { timeoutMs: options.redisTimeoutMs ?? 250, now: options.now, anyError: true });

  /** Attempts in the rolling window: this window's, plus the previous one's still inside it. */
  const weighted = (now: number, current: number, previous: number) => {
    const elapsed = (now % options.windowMs) / options.windowMs;
    return current + previous * (1 - elapsed);
  };
  const retryAfter = (now: number) => Math.max(1, Math.ceil((options.windowMs - (now % options.windowMs)) / 1000));

  const counts = async (address: string, now: number, delta: number): Promise<[number, number]> => {
    const window = windowOf(now);
    // Memory counts every attempt of this process, Redis those of every replica: the higher of
    // each wins, so that switching between them (a Redis too slow under load, then in time again)
    // never starts the count afresh.
    const local = memory(address, window, delta);
    const shared = await where.run(
      async () => {
        const replies = await options
          .redis!.multi()
          .incrby(key(address, window), delta)
          .pexpire(key(address, window), options.windowMs * 2)
          .get(key(address, window - 1))
          .exec();
        return [Number(replies?.[0]?.[1] ?? 0), Number(replies?.[2]?.[1] ?? 0)] as [number, number];
      },
      () => null,
    );
    return shared ? [Math.max(shared[0], local[0]), Math.max(shared[1], local[1])] : local;
  };

  return {
    async reserve(address) {
      const now = clock();
      const [current, previous] = await counts(address, now, 1);
      return weighted(now, current, previous) > options.limit ? retryAfter(now) : 0;
    },
    async release(address) {
      await counts(address, clock(), -1);
    },
  };
}

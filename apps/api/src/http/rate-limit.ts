import { createHash } from "node:crypto";
import { MemoryStore, rateLimit, type ClientRateLimitInfo, type IncrementResponse, type Options, type Store } from "express-rate-limit";
import { RedisStore, type RedisReply } from "rate-limit-redis";
import type { RequestHandler } from "express";
import type { RedisClient } from "@mailhooks/queue";
import { AppError } from "../errors.js";
import { redisOrMemory, type RedisOrMemory } from "./redis-or-memory.js";

/**
 * Per-account rate limit (RATE_LIMIT_PER_MINUTE, after authentication) shared by every API
 * replica through Redis (one fixed one-minute window per account, whatever key it uses). Over
 * the limit: 429 `rate_limited` with `Retry-After` in seconds. While Redis is unreachable each
 * process counts on its own, in memory (accepting needs only PostgreSQL, and an outage must not
 * lift the limit), as the failed-authentication limiter does; likewise while Redis hangs: each
 * of the limiter's commands may take `redisTimeoutMs` (RATE_LIMIT_REDIS_TIMEOUT_MS), and one that
 * times out sends the counting to memory for a while (see redis-or-memory.ts).
 */
export function rateLimitPerAccount(redis: RedisClient, prefix: string, perMinute: number, redisTimeoutMs: number): RequestHandler {
  if (perMinute === 0) return (_req, _res, next) => next();
  return rateLimit({
    windowMs: 60_000,
    limit: perMinute,
    standardHeaders: "draft-7",
    legacyHeaders: false,
    // The store falls back to memory itself; an error that still reaches the limiter (a bug)
    // lets the request through rather than refusing work PostgreSQL could accept.
    passOnStoreError: true,
    keyGenerator: (req) => req.principal?.accountId ?? "anonymous",
    store: new RedisOrMemoryStore(new RedisStore({ prefix: `${prefix}:ratelimit:`, sendCommand: scriptsByText(redis) }), redisOrMemory(redis, { timeoutMs: redisTimeoutMs })),
    handler: (req, _res, next) => {
      const resetTime = (req as { rateLimit?: { resetTime?: Date } }).rateLimit?.resetTime;
      const retryAfter = resetTime ? Math.max(1, Math.ceil((resetTime.getTime() - Date.now()) / 1000)) : 60;
      next(new AppError("rate_limited", `too many requests for this account; retry in ${retryAfter} s`, undefined, { "Retry-After": String(retryAfter) }));
    },
  });
}

/**
 * Counts in Redis while it is connected and answers in time, else in this process's memory: an
 * outage neither lifts the limit, nor holds each request, nor fills the log (express-rate-limit writes every store error to console.error,
 * past the service's logger). An error that is not an outage is the limiter's to handle.
 */
class RedisOrMemoryStore implements Store {
  readonly localKeys = false;
  readonly prefix: string;
  private readonly memory = new MemoryStore();

  constructor(
    private readonly shared: RedisStore,
    private readonly where: RedisOrMemory,
  ) {
    this.prefix = shared.prefix;
  }

  init(options: Options): void {
    this.memory.init(options);
    void this.shared.init?.(options);
  }

  private either<T>(viaRedis: () => Promise<T>, viaMemory: () => T | Promise<T>): Promise<T> {
    return this.where.run(viaRedis, viaMemory);
  }

  increment(key: string): Promise<IncrementResponse> {
    return this.either(() => this.shared.increment(key), () => this.memory.increment(key));
  }

  get(key: string): Promise<ClientRateLimitInfo | undefined> {
    return this.either(() => this.shared.get(key), () => this.memory.get(key));
  }

  decrement(key: string): Promise<void> {
    return this.either(() => this.shared.decrement(key), () => this.memory.decrement(key));
  }

  resetKey(key: string): Promise<void> {
    return this.either(() => this.shared.resetKey(key), () => this.memory.resetKey(key));
  }

  shutdown(): void {
    void this.memory.shutdown();
  }
}

/**
 * The store's command channel, with its Lua scripts sent by text. The store loads its scripts
 * once (SCRIPT LOAD) and then runs them by SHA (EVALSHA). Both fail in ways that switch the limit
 * off (passOnStoreError): loaded before the connection is ready (always, at start-up) the SHA
 * promise would be a rejection kept for good; and on a Redis Cluster the script is loaded on one
 * node while EVALSHA goes to the node of its key (NOSCRIPT). So SCRIPT LOAD is answered here with
 * the SHA1 Redis would give, the script kept, and EVALSHA sent as EVAL with the script's text (a
 * few hundred bytes), which any node runs.
 */
function scriptsByText(redis: RedisClient) {
  const scripts = new Map<string, string>();
  return (command: string, ...args: string[]): Promise<RedisReply> => {
    const name = command.toUpperCase();
    if (name === "SCRIPT" && args[0]?.toUpperCase() === "LOAD") {
      const sha = createHash("sha1").update(args[1] ?? "", "utf8").digest("hex");
      scripts.set(sha, args[1] ?? "");
      return Promise.resolve(sha);
    }
    if (name === "EVALSHA" && scripts.has(args[0])) return redis.call("EVAL", scripts.get(args[0])!, ...args.slice(1)) as Promise<RedisReply>;
    return redis.call(command, ...args) as Promise<RedisReply>;
  };
}

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
    store: new RedisOrMemoryStore(
      new RedisStore({ prefix: `${prefix}:ratelimit:`, sendCommand: scriptsByText(redis) }),
      redisOrMemory(redis, { timeoutMs: redisTimeoutMs }),
    ),
    handler: (req, _res, next) => {
      const resetTime = (req as { rateLimit?: { resetTime?: Date } }).rateLimit?.resetTime;
      const retryAfter = resetTime ? Math.max(1, Math.ceil((resetTime.getTime() - Date.now()) / 1000)) : 60;
      next(
        new AppError("rate_limited", "account_rate_limit", `too many requests for this account; retry in ${retryAfter} s`, {
          headers: { "Retry-After": String(retryAfter) },
        }),
      );
    },
  });
}

/**
 * Counts in Redis while it is connected and answers in time, and always in this process's memory
 * (see increment): an outage neither lifts the limit, nor holds each request, nor fills the log (express-rate-limit writes every store error to console.error,
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

  /**
   * This process counts every request in memory too, and answers the higher of the two counts:
   * Redis's covers every replica, memory's every request of this one, including those counted
   * while Redis was skipped. Otherwise each switch between them (a Redis that answers slowly
   * under load, then in time again) would start the count afresh and let the limit through again.
   */
  async increment(key: string): Promise<IncrementResponse> {
    const local = await this.memory.increment(key);
    const shared = await this.where.run(
      () => this.shared.increment(key),
      () => undefined,
    );
    return shared && shared.totalHits >= local.totalHits ? shared : local;
  }

  async get(key: string): Promise<ClientRateLimitInfo | undefined> {
    const local = await this.memory.get(key);
    const shared = await this.where.run(
      () => this.shared.get(key),
      () => undefined,
    );
    return shared && shared.totalHits >= (local?.totalHits ?? 0) ? shared : local;
  }

  async decrement(key: string): Promise<void> {
    await this.memory.decrement(key);
    await this.where.run(
      () => this.shared.decrement(key),
      () => undefined,
    );
  }

  async resetKey(key: string): Promise<void> {
    await this.memory.resetKey(key);
    await this.where.run(
      () => this.shared.resetKey(key),
      () => undefined,
    );
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
      const sha = createHash("sha1")
        .update(args[1] ?? "", "utf8")
        .digest("hex");
      scripts.set(sha, args[1] ?? "");
      return Promise.resolve(sha);
    }
    if (name === "EVALSHA" && scripts.has(args[0]))
      return redis.call("EVAL", scripts.get(args[0])!, ...args.slice(1)) as Promise<RedisReply>;
    return redis.call(command, ...args) as Promise<RedisReply>;
  };
}

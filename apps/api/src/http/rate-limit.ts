import { createHash } from "node:crypto";
import { rateLimit } from "express-rate-limit";
import { RedisStore, type RedisReply } from "rate-limit-redis";
import type { RequestHandler } from "express";
import type { Redis } from "ioredis";
import { AppError } from "../errors.js";

/**
 * Per-API-key rate limit shared by every API replica through Redis (one fixed one-minute
 * window per key). Over the limit: 429 `rate_limited` with `Retry-After` in seconds. While Redis
 * is unreachable the limiter lets requests through: those that need Redis answer 503 anyway.
 */
export function rateLimitPerKey(redis: Redis, prefix: string, perMinute: number): RequestHandler {
  if (perMinute === 0) return (_req, _res, next) => next();
  return rateLimit({
    windowMs: 60_000,
    limit: perMinute,
    standardHeaders: "draft-7",
    legacyHeaders: false,
    passOnStoreError: true,
    keyGenerator: (req) => req.principal?.apiKeyId ?? "anonymous",
    store: new RedisStore({
      prefix: `${prefix}:ratelimit:`,
      sendCommand: (command: string, ...args: string[]) => {
        // The store loads its Lua scripts once, when the app is built, and keeps the promise
        // of their SHA for good: loaded before the connection is ready (always, at start-up)
        // it would be a rejection, every later call would fail, and passOnStoreError would let
        // every request through, i.e. no limit at all. Until Redis is ready, SCRIPT LOAD is
        // answered with the SHA1 Redis itself would give; the store's NOSCRIPT path then loads
        // the script on first use.
        if (command.toUpperCase() === "SCRIPT" && args[0]?.toUpperCase() === "LOAD" && redis.status !== "ready") {
          return Promise.resolve(createHash("sha1").update(args[1] ?? "", "utf8").digest("hex"));
        }
        return redis.call(command, ...args) as Promise<RedisReply>;
      },
    }),
    handler: (req, _res, next) => {
      const resetTime = (req as { rateLimit?: { resetTime?: Date } }).rateLimit?.resetTime;
      const retryAfter = resetTime ? Math.max(1, Math.ceil((resetTime.getTime() - Date.now()) / 1000)) : 60;
      next(new AppError("rate_limited", `too many requests for this API key; retry in ${retryAfter} s`, undefined, { "Retry-After": String(retryAfter) }));
    },
  });
}

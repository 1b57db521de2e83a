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
      sendCommand: (command: string, ...args: string[]) => redis.call(command, ...args) as Promise<RedisReply>,
    }),
    handler: (req, _res, next) => {
      const resetTime = (req as { rateLimit?: { resetTime?: Date } }).rateLimit?.resetTime;
      const retryAfter = resetTime ? Math.max(1, Math.ceil((resetTime.getTime() - Date.now()) / 1000)) : 60;
      next(new AppError("rate_limited", `too many requests for this API key; retry in ${retryAfter} s`, undefined, { "Retry-After": String(retryAfter) }));
    },
  });
}

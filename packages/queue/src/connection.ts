import { Redis } from "ioredis";

/**
 * ioredis connections for BullMQ. A worker's connection must retry forever
 * (`maxRetriesPerRequest: null`, BullMQ's production checklist); a producer's fails fast so that
 * the API can answer 503 instead of hanging while Redis is away.
 */
export function createRedisConnection(url: string, role: "worker" | "producer"): Redis {
  return new Redis(url, {
    maxRetriesPerRequest: role === "worker" ? null : 1,
    enableOfflineQueue: role === "worker",
    connectTimeout: 5_000,
    // Reconnect quickly after a Redis restart, at most every 2 s.
    retryStrategy: (times) => Math.min(times * 100, 2_000),
  });
}

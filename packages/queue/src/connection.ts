import type { Cluster, Redis, RedisOptions } from "ioredis";
import { ErrorMarkingCluster, ErrorMarkingRedis } from "./error-marking.js";

/** A connection to Redis: one server, or a Redis Cluster (REDIS_CLUSTER=true). */
export type RedisClient = Redis | Cluster;

export interface RedisConnectionOptions {
  /** REDIS_CLUSTER: `url` names one or more (comma-separated) nodes of a Redis Cluster. */
  cluster?: boolean;
  /** A producer's command timeout, in ms (PRODUCER_COMMAND_TIMEOUT_MS by default). */
  commandTimeoutMs?: number;
}

/**
 * How long a producer's command may wait for its reply, in ms: a Redis that accepts the
 * connection but stops answering (frozen, swapping, a half-open link) must not hold a caller
 * (the relay holds outbox row locks meanwhile). Not for workers: their blocking commands wait on
 * purpose, and BullMQ retries their connection by itself.
 */
export const PRODUCER_COMMAND_TIMEOUT_MS = 5_000;

/**
 * ioredis connections for BullMQ. A worker's connection must retry forever
 * (`maxRetriesPerRequest: null`, BullMQ's production checklist); a producer's fails fast, so
 * that a caller that can do without Redis (the API, the relay) is not held up while it is away.
 * A producer's commands also time out (PRODUCER_COMMAND_TIMEOUT_MS). Both keep TCP keepalive on
 * (ioredis's default, probes after 30 s idle).
 * With `cluster`, a Cluster client on the nodes of `url` (comma-separated `redis://host:port`).
 * A command that fails for want of a usable connection (timed out, Redis away) fails with an
 * error marked for isInfrastructureError (error-marking.ts).
 */
export function createRedisConnection(url: string, role: "worker" | "producer", options: RedisConnectionOptions = {}): RedisClient {
  // No `replyMapping`: ioredis's default (legacy replies), which BullMQ expects.
  const redisOptions: Omit<RedisOptions, "replyMapping"> = {
    maxRetriesPerRequest: role === "worker" ? null : 1,
    ...(role === "producer" ? { commandTimeout: options.commandTimeoutMs ?? PRODUCER_COMMAND_TIMEOUT_MS } : {}),
    connectTimeout: 5_000,
    // Reconnect quickly after a Redis restart, at most every 2 s.
    retryStrategy: (times) => Math.min(times * 100, 2_000),
  };
  if (!options.cluster) return new ErrorMarkingRedis(url, { ...redisOptions, enableOfflineQueue: role === "worker" });
  const nodes = url.split(",").map((node) => {
    const parsed = new URL(node.trim());
    return { host: parsed.hostname, port: Number(parsed.port || 6379) };
  });
  const first = new URL(url.split(",")[0].trim());
  return new ErrorMarkingCluster(nodes, {
    enableOfflineQueue: role === "worker",
    clusterRetryStrategy: (times) => Math.min(times * 100, 2_000),
    redisOptions: {
      ...redisOptions,
      ...(first.password ? { password: decodeURIComponent(first.password) } : {}),
      ...(first.username ? { username: decodeURIComponent(first.username) } : {}),
      ...(first.protocol === "rediss:" ? { tls: {} } : {}),
    },
  });
}

/** What a service's configuration (@mailhooks/config) says of its Redis. */
export interface RedisConfig {
  REDIS_URL: string;
  REDIS_CLUSTER: boolean;
  QUEUE_PREFIX: string;
}

/**
 * A connection (createRedisConnection) to the Redis a service's configuration names, and the
 * prefix of the deployment's keys there (redisKeyPrefix).
 */
export function createConfiguredRedis(config: RedisConfig, role: "worker" | "producer"): { connection: RedisClient; keyPrefix: string } {
  return {
    connection: createRedisConnection(config.REDIS_URL, role, { cluster: config.REDIS_CLUSTER }),
    keyPrefix: redisKeyPrefix(config.QUEUE_PREFIX, config.REDIS_CLUSTER),
  };
}

/**
 * The prefix of every key of a deployment in Redis: QUEUE_PREFIX, hash-tagged on a Redis Cluster
 * (`{whk}`), so that each BullMQ queue's keys, which its Lua scripts use together, and the
 * deployment's own multi-key operations stay in one slot.
 */
export function redisKeyPrefix(queuePrefix: string, cluster: boolean): string {
  return cluster && !/\{.+\}/.test(queuePrefix) ? `{${queuePrefix}}` : queuePrefix;
}

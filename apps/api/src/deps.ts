import type { ApiConfig } from "@mailhooks/config";
import { AppError } from "./errors.js";
import type { PrismaClient } from "@mailhooks/db";
import type { DeliveryQueue } from "@mailhooks/queue";
import type { Redis } from "ioredis";

/** What the API's routes and services use; built once in main.ts (or by a test). */
export interface ApiDeps {
  prisma: PrismaClient;
  redis: Redis;
  queue: DeliveryQueue;
  config: ApiConfig;
}

/**
 * Fails fast while Redis is not connected: BullMQ would otherwise wait for the connection, and an
 * event must not be accepted that cannot be queued. A status check, not a round trip.
 * @throws AppError unavailable
 */
export function requireQueue(deps: ApiDeps): void {
  if (deps.redis.status !== "ready") throw new AppError("unavailable", "the queue (Redis) is unreachable; retry later");
}

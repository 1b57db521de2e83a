import type { PrismaClient } from "@mailhooks/db";
import type { DeliveryQueue } from "@mailhooks/queue";
import type { Redis } from "ioredis";

/** What the API's routes and services use; built once in main.ts (or by a test). */
export interface ApiDeps {
  prisma: PrismaClient;
  redis: Redis;
  queue: DeliveryQueue;
}

import type pg from "pg";
import type { Queue } from "bullmq";
import type { RedisClient } from "@mailhooks/queue";
import type { ApiConfig } from "@mailhooks/config";
import type { KeyAuthenticator } from "@mailhooks/access";
import { createEventAcceptor } from "@mailhooks/delivery-state";
import type { PrismaClient } from "@mailhooks/db";
import type { Keyring } from "@mailhooks/secrets";
import { createPullWaiters, type PullWaiters } from "./pull-waiters.js";

/**
 * What the API's routes and services use; built once in main.ts (or by a test). The API never
 * writes to the queue: what it accepts goes to PostgreSQL with its row of the work queue (@mailhooks/
 * delivery-state). Redis serves the rate limits, and `queue` is only read (metrics, board).
 */
export interface ApiDeps {
  /** The process's PostgreSQL pool (also under `prisma`). */
  pool: pg.Pool;
  prisma: PrismaClient;
  redis: RedisClient;
  /** The deliveries queue, read for the queue-depth gauge and shown on the operators' board. */
  queue: Queue;
  config: ApiConfig;
  /** Encrypts and decrypts webhook secrets at rest (SECRET_ENCRYPTION_KEYS). */
  keyring: Keyring;
  /** API keys, cached (see key-access.ts for how revocations reach the cache). */
  keys: KeyAuthenticator;
  /** Accepts events with group commit (concurrent ingests share one statement). */
  acceptor: ReturnType<typeof createEventAcceptor>;
  /** The waiting pulls of listen webhooks (pull-waiters.ts); main.ts gives one that LISTENs. */
  pulls: PullWaiters;
}

/**
 * `deps` with the parts made from the others added when missing: the event acceptor, and waiting
 * pulls woken by their timers only (a caller that serves listen webhooks passes createPullWaiters
 * with its database URL, and closes it).
 */
export function completeDeps(deps: Omit<ApiDeps, "acceptor" | "pulls"> & Partial<Pick<ApiDeps, "acceptor" | "pulls">>): ApiDeps {
  return {
    ...deps,
    acceptor: deps.acceptor ?? createEventAcceptor(deps.pool, deps.config.QUEUE_PREFIX),
    pulls: deps.pulls ?? createPullWaiters(),
  };
}

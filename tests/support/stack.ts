import { randomUUID } from "node:crypto";
import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import { Queue } from "bullmq";
import type pg from "pg";
import { apiConfigSchema, dispatcherConfigSchema, loadConfig, secretKeysOf } from "@mailhooks/config";
import { createKeyring, parseKeys } from "@mailhooks/secrets";
import { createConfiguredDatabase, type PrismaClient } from "@mailhooks/db";
import { configureLogger } from "@mailhooks/logger";
import { createConfiguredRedis, QUEUE_NAMES, redisKeyPrefix } from "@mailhooks/queue";
import { startReceiver, testCertificate, type Receiver, type ReceiverOptions } from "@mailhooks/receiver";
import { createAdminApp } from "../../apps/api/src/admin-app.js";
import { createApp } from "../../apps/api/src/app.js";
import { startKeyAccess } from "../../apps/api/src/key-access.js";
import { createPullWaiters } from "../../apps/api/src/pull-waiters.js";
import { createApiKey } from "@mailhooks/access";
import { callApi, type ApiAnswer, type CallOptions } from "./api-call.js";
import { startInProcessDispatcher, type InProcessDispatcher } from "./delivery-worker.js";
import { testDatabaseUrl, testRedisUrl } from "./env.js";
import { LOOPBACK_TARGETS } from "@mailhooks/url-policy";

/**
 * A whole service for one test file, in-process: the API on an ephemeral port, a dispatcher
 * (its relay and its worker), a fresh queue prefix and a fresh account, against the real
 * PostgreSQL and Redis.
 * Retry delays and the receiver deadline are shortened through the same environment variables
 * an operator would set, parsed by the processes' own config schemas.
 */
export interface Stack {
  baseUrl: string;
  apiKey: string;
  apiKeyId: string;
  accountId: string;
  prisma: PrismaClient;
  /** The pool under `prisma`. */
  pool: pg.Pool;
  /** QUEUE_PREFIX of this stack (its rows in the database). */
  prefix: string;
  /** Its keys' prefix in Redis: `prefix`, hash-tagged on a Redis Cluster. */
  keyPrefix: string;
  /** The operators' listener (ADMIN_HOST:ADMIN_PORT), when ADMIN_USERNAME/ADMIN_PASSWORD are set. */
  adminUrl: string | null;
  /** Calls the API with this stack's key; the answer is checked against the OpenAPI document (see callApi). */
  api: (method: string, path: string, body?: unknown, headers?: Record<string, string>, options?: CallOptions) => Promise<ApiAnswer>;
  /** Issues a key for another, new account. */
  newAccountKey: () => Promise<string>;
  /** Another, new account with its own key and an `api` bound to that key (isolates fan-out between tests). */
  newAccount: () => Promise<Account>;
  startReceiver: (options: Omit<ReceiverOptions, "cert" | "key">) => Promise<Receiver>;
  stopDispatcher: () => Promise<void>;
  /** Starts the in-process dispatcher again after stopDispatcher (nothing if it runs). */
  startDispatcher: () => void;
  /**
   * Starts another API instance (a replica) on the same PostgreSQL, Redis and QUEUE_PREFIX, with
   * its own Redis connection and queue, as a second `npm run start:api` behind a load balancer
   * would be. Closed by `close()` at the latest.
   */
  startApiReplica: () => Promise<ApiReplica>;
  close: () => Promise<void>;
}

/** A second API process of a stack: its own port and Redis connection, the stack's everything else. */
export interface ApiReplica {
  baseUrl: string;
  /** Calls this replica with `apiKey`. */
  apiAs: (apiKey: string) => Stack["api"];
  close: () => Promise<void>;
}

/** An account of the stack: its key and an `api` calling the stack's API with that key. */
export interface Account {
  apiKey: string;
  apiKeyId: string;
  accountId: string;
  api: Stack["api"];
}

export interface StackOptions {
  /** Environment of both processes, e.g. `{ DELIVERY_RETRY_DELAYS_MS: "200,400,600" }`. */
  env?: Record<string, string>;
  /** Start no dispatcher (API-only tests: accepted work waits in the work queue). */
  dispatcher?: boolean;
}

// Tests print only warnings and errors of the service's own loggers (LOG_LEVEL overrides).
configureLogger({ level: process.env.LOG_LEVEL ?? "warn", format: "pretty" });

export async function startStack(options: StackOptions = {}): Promise<Stack> {
  const prefix = `test-${randomUUID()}`;
  const env = {
    DATABASE_URL: testDatabaseUrl(),
    REDIS_URL: testRedisUrl(),
    QUEUE_PREFIX: prefix,
    ALLOW_PRIVATE_TARGETS: LOOPBACK_TARGETS,
    PORT: "0",
    DATABASE_POOL_SIZE: "5",
    ...options.env,
  };
  const apiConfig = loadConfig(apiConfigSchema, env);
  const dispatcherConfig = loadConfig(dispatcherConfigSchema, { DISPATCHER_CONCURRENCY: "16", ...env });

  const db = createConfiguredDatabase(apiConfig);
  /** The Redis key prefix: `prefix`, hash-tagged on a Redis Cluster. */
  const keyPrefix = redisKeyPrefix(prefix, apiConfig.REDIS_CLUSTER);
  const keyring = createKeyring(parseKeys(secretKeysOf(apiConfig)));
  const { prisma, pool } = db;
  /** One API process: its own Redis connection, queue and HTTP server on an ephemeral port. */
  const startApi = async () => {
    const redis = createConfiguredRedis(apiConfig, "producer").connection;
    // As main.ts does: connection errors are logged, not an unhandled 'error' event.
    redis.on("error", () => undefined);
    const queue = new Queue(QUEUE_NAMES.deliveries, { connection: redis, prefix: keyPrefix });
    queue.on("error", () => undefined);
    const keyAccess = startKeyAccess(prisma, apiConfig.DATABASE_URL);
    // As main.ts does: waiting pulls of listen webhooks woken by one LISTEN connection.
    const pulls = createPullWaiters({ databaseUrl: apiConfig.DATABASE_URL });
    const server: Server = await new Promise((resolve) => {
      const app = createApp({ pool, prisma, redis, queue, config: apiConfig, keyring, keys: keyAccess.keys, pulls });
      const s = app.listen(0, "127.0.0.1", () => resolve(s));
    });
    const baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    return { redis, queue, server, baseUrl, keyAccess, pulls };
  };
  const { redis, queue, server, baseUrl, keyAccess, pulls } = await startApi();
  const adminApp = createAdminApp(apiConfig, [queue]);
  const adminServer: Server | null = adminApp
    ? await new Promise((resolve) => {
        const s = adminApp.listen(0, "127.0.0.1", () => resolve(s));
      })
    : null;
  const adminUrl = adminServer ? `http://127.0.0.1:${(adminServer.address() as AddressInfo).port}` : null;
  const replicas: ApiReplica[] = [];

  let dispatcher: InProcessDispatcher | null = null;
  const startDispatcher = () => {
    dispatcher ??= startInProcessDispatcher(pool, dispatcherConfig, { queuePrefix: prefix, keyPrefix });
  };
  if (options.dispatcher !== false) startDispatcher();

  const issued = await createApiKey(prisma, `test-account-${randomUUID()}`);
  const receivers: Receiver[] = [];
  const { cert, key } = testCertificate();

  const apiWithKey =
    (apiKey: string, base = baseUrl): Stack["api"] =>
    (method, urlPath, body, headers, callOptions) =>
      callApi(base, apiKey, method, urlPath, body, headers, callOptions);
  const api = apiWithKey(issued.key);

  const stopDispatcher = async () => {
    await dispatcher?.close();
    dispatcher = null;
  };

  return {
    baseUrl,
    adminUrl,
    apiKey: issued.key,
    apiKeyId: issued.id,
    accountId: issued.account_id,
    prisma,
    pool,
    prefix,
    keyPrefix,
    api,
    newAccountKey: async () => (await createApiKey(prisma, `test-account-${randomUUID()}`)).key,
    newAccount: async () => {
      const other = await createApiKey(prisma, `test-account-${randomUUID()}`);
      return { apiKey: other.key, apiKeyId: other.id, accountId: other.account_id, api: apiWithKey(other.key) };
    },
    startReceiver: async (receiverOptions) => {
      const receiver = await startReceiver({ ...receiverOptions, cert, key });
      receivers.push(receiver);
      return receiver;
    },
    stopDispatcher,
    startDispatcher,
    startApiReplica: async () => {
      const replica = await startApi();
      let closed = false;
      const handle: ApiReplica = {
        baseUrl: replica.baseUrl,
        apiAs: (apiKey) => apiWithKey(apiKey, replica.baseUrl),
        close: async () => {
          if (closed) return;
          closed = true;
          await replica.pulls.close();
          await new Promise((resolve) => replica.server.close(resolve));
          await replica.keyAccess.close();
          await replica.queue.close();
          await replica.redis.quit().catch(() => replica.redis.disconnect());
        },
      };
      replicas.push(handle);
      return handle;
    },
    close: async () => {
      await Promise.all(replicas.map((r) => r.close()));
      await stopDispatcher();
      await Promise.all(receivers.map((r) => r.close()));
      await pulls.close();
      await new Promise((resolve) => server.close(resolve));
      if (adminServer) {
        adminServer.closeAllConnections();
        await new Promise((resolve) => adminServer.close(resolve));
      }
      await keyAccess.close();
      // A stack whose Redis is unreachable (REDIS_URL at a closed port) never connected: the
      // queue would wait for a connection forever, so only a connected one is cleaned up.
      const connected = redis.status === "ready";
      if (connected) {
        await queue.obliterate({ force: true }).catch(() => undefined);
        const reserveLane = new Queue(QUEUE_NAMES.reserveDeliveries, { connection: redis, prefix: keyPrefix });
        await reserveLane.obliterate({ force: true }).catch(() => undefined);
        await reserveLane.close();
      }
      await queue.close();
      if (connected) await redis.quit().catch(() => undefined);
      else redis.disconnect();
      // Work never done (a test that stopped its dispatcher) and the round are this prefix's alone.
      for (const table of ["work_items", "webhook_queues", "dispatchers"])
        await pool.query(`DELETE FROM ${table} WHERE queue_prefix = $1`, [prefix]).catch(() => undefined);
      await db.close();
    },
  };
}

/** The tests' one wait on a condition (for state that no receiver sees, e.g. a status in the API): tests/support/wait.ts. */
export { TIMED_OUT, waitUntil, WaitTimeout } from "./wait.js";

/** Valid `data` for each event kind, for tests that need any valid event. */
export function sampleData(eventType: string, overrides: Record<string, unknown> = {}): Record<string, unknown> {
  const common = {
    messageId: `<${randomUUID()}@mail.example.com>`,
    threadId: "thr_1",
    inboxId: "inbox_1",
    from: "alice@example.com",
    to: ["bob@example.org"],
    subject: "Hello",
  };
  const own: Record<string, Record<string, unknown>> = {
    "message.sent": { status: "sent" },
    "message.delivered": { status: "delivered", deliveredAt: "2026-11-22T10:00:00Z" },
    "message.opened": { openCount: 1, openedAt: "2026-11-22T10:00:00Z" },
    "message.clicked": { url: "https://example.com/x", clickCount: 2, clickedAt: "2026-11-22T10:00:00Z" },
    "message.received": { body: "Hi", headers: { messageId: common.messageId, inReplyTo: "", references: "" } },
    "message.bounced": { bounceType: "hard", bounceCode: "5.1.1", bounceMessage: "User unknown", bouncedAt: "2026-11-22T10:00:00Z" },
  };
  return { ...common, ...own[eventType], ...overrides };
}

/**
 * The API process: REST API on PORT. Stateless; any number may run behind a load balancer.
 * SIGTERM stops accepting connections, lets in-flight requests finish, then exits 0.
 */
import { secretKeysOf } from "@mailhooks/config";
import { createKeyring, parseKeys } from "@mailhooks/secrets";
import { createConfiguredDatabase } from "@mailhooks/db";
import { startService } from "@mailhooks/command-line/service";
import type { IncomingMessage, ServerResponse } from "node:http";
import { Queue } from "bullmq";
import { createConfiguredRedis, QUEUE_NAMES } from "@mailhooks/queue";
import { createAdminApp } from "./admin-app.js";
import { createApp } from "./app.js";
import { startKeyAccess } from "./key-access.js";
import { createPullWaiters } from "./pull-waiters.js";
import { createApiServer } from "./http/server.js";

const { config, logger } = startService("api");

const db = createConfiguredDatabase(config);
const { connection: redis, keyPrefix } = createConfiguredRedis(config, "producer");
redis.on("error", (error: Error) => logger.warn("redis error", { error: error.message }));
// Read only (queue depth, the operators' board): the API never adds jobs.
const queue = new Queue(QUEUE_NAMES.deliveries, { connection: redis, prefix: keyPrefix });
queue.on("error", (error) => logger.warn("queue error", { error: error.message }));

const maintenanceQueue = new Queue(QUEUE_NAMES.maintenance, { connection: redis, prefix: keyPrefix });
maintenanceQueue.on("error", (error) => logger.warn("queue error", { error: error.message }));
const keyring = createKeyring(parseKeys(secretKeysOf(config)));
const keyAccess = startKeyAccess(db.prisma, config.DATABASE_URL);
const pulls = createPullWaiters({ databaseUrl: config.DATABASE_URL });
const app = createApp({ pool: db.pool, prisma: db.prisma, redis, queue, config, keyring, keys: keyAccess.keys, pulls });
const server = createApiServer(app, {
  headersTimeoutMs: config.HTTP_HEADERS_TIMEOUT_MS,
  requestTimeoutMs: config.HTTP_REQUEST_TIMEOUT_MS,
  keepAliveTimeoutMs: config.HTTP_KEEP_ALIVE_TIMEOUT_MS,
}).listen(config.PORT, () => logger.info("api listening", { port: config.PORT }));
const adminApp = createAdminApp(config, [queue, maintenanceQueue]);
const adminServer = adminApp?.listen(config.ADMIN_PORT, config.ADMIN_HOST, () =>
  logger.info("admin listening", { host: config.ADMIN_HOST, port: config.ADMIN_PORT }),
);

let stopping = false;
/**
 * Answers in progress. Once stopping, every answer closes its connection: otherwise a keep-alive
 * client (a load balancer, an SDK's agent) holds the server open, since its connection is not
 * idle while a request is in flight, stays open after the answer for keepAliveTimeout and may
 * carry new requests, so close() would wait until the deadline and the process would exit 1.
 */
const inFlight = new Set<ServerResponse>();
server.prependListener("request", (_req: IncomingMessage, res: ServerResponse) => {
  inFlight.add(res);
  res.once("close", () => inFlight.delete(res));
  if (stopping) res.setHeader("connection", "close");
});

function shutdown(signal: string) {
  if (stopping) return;
  stopping = true;
  logger.info("stopping", { signal });
  const deadline = setTimeout(() => process.exit(1), 15_000);
  deadline.unref();
  for (const res of inFlight) if (!res.headersSent) res.setHeader("connection", "close");
  // Connections idle now are closed by close(); those that become idle later (an answer already
  // under way when SIGTERM came) are closed as they do.
  const idle = setInterval(() => server.closeIdleConnections(), 100);
  idle.unref();
  adminServer?.close();
  adminServer?.closeAllConnections();
  // Waiting pulls answer now, with what they have.
  void pulls.close();
  server.close(() => void closeAndExit());
  server.closeIdleConnections();
}
/** Once the server has closed: the clients, then exit 0 (a rejection here ends the process too). */
async function closeAndExit(): Promise<void> {
  await keyAccess.close();
  await Promise.all([queue.close(), maintenanceQueue.close()]).catch(() => undefined);
  await redis.quit().catch(() => undefined);
  await db.close();
  process.exit(0);
}
process.on("SIGTERM", () => shutdown("SIGTERM"));
process.on("SIGINT", () => shutdown("SIGINT"));

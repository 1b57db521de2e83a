/**
 * The API process: REST API on PORT. Stateless; any number may run behind a load balancer.
 * SIGTERM stops accepting connections, lets in-flight requests finish, then exits 0.
 */
import { apiConfigSchema, loadConfig, type ApiConfig } from "@mailhooks/config";
import { createPrismaClient } from "@mailhooks/db";
import { configureLogger, getLogger } from "@mailhooks/logger";
import type { IncomingMessage, ServerResponse } from "node:http";
import { Queue } from "bullmq";
import { createRedisConnection, DeliveryQueue, QUEUE_NAMES } from "@mailhooks/queue";
import { createApp } from "./app.js";

let config: ApiConfig;
try {
  config = loadConfig(apiConfigSchema, process.env);
} catch (error) {
  console.error(`api: ${(error as Error).message}`);
  process.exit(1);
}
configureLogger({ level: config.LOG_LEVEL, format: config.LOG_FORMAT });
const logger = getLogger("api");

const prisma = createPrismaClient(config.DATABASE_URL, config.DATABASE_POOL_SIZE);
const redis = createRedisConnection(config.REDIS_URL, "producer");
redis.on("error", (error) => logger.warn("redis error", { error: error.message }));
const queue = new DeliveryQueue(redis, config.QUEUE_PREFIX, config.DELIVERY_RETRY_DELAYS_MS);
queue.queue.on("error", (error) => logger.warn("queue error", { error: error.message }));

const maintenanceQueue = new Queue(QUEUE_NAMES.maintenance, { connection: redis, prefix: config.QUEUE_PREFIX });
maintenanceQueue.on("error", (error) => logger.warn("queue error", { error: error.message }));
const app = createApp({ prisma, redis, queue, config }, [queue.queue, maintenanceQueue]);
const server = app.listen(config.PORT, () => logger.info("api listening", { port: config.PORT }));

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
  server.close(async () => {
    await Promise.all([queue.close(), maintenanceQueue.close()]).catch(() => undefined);
    await redis.quit().catch(() => undefined);
    await prisma.$disconnect();
    process.exit(0);
  });
  server.closeIdleConnections();
}
process.on("SIGTERM", () => shutdown("SIGTERM"));
process.on("SIGINT", () => shutdown("SIGINT"));

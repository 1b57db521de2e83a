/**
 * The dispatcher process: a BullMQ worker that signs and delivers envelopes. Any number may run
 * against one PostgreSQL and one Redis. SIGTERM lets in-flight attempts finish, then exits 0.
 */
import { dispatcherConfigSchema, loadConfig, type DispatcherConfig } from "@mailhooks/config";
import { createPrismaClient } from "@mailhooks/db";
import { configureLogger, getLogger } from "@mailhooks/logger";
import { createRedisConnection, DeliveryQueue } from "@mailhooks/queue";
import { createHttpClient } from "./delivery/http-client.js";
import { startMaintenance } from "./maintenance.js";
import { createDispatcherMetrics, serveMetrics } from "./metrics.js";
import { createDeliveryWorker } from "./worker.js";

let config: DispatcherConfig;
try {
  config = loadConfig(dispatcherConfigSchema, process.env);
} catch (error) {
  console.error(`dispatcher: ${(error as Error).message}`);
  process.exit(1);
}
configureLogger({ level: config.LOG_LEVEL, format: config.LOG_FORMAT });
const logger = getLogger("dispatcher");

const prisma = createPrismaClient(config.DATABASE_URL, config.DATABASE_POOL_SIZE);
const connection = createRedisConnection(config.REDIS_URL, "worker");
const { client, agent } = createHttpClient({ timeoutMs: config.DELIVERY_TIMEOUT_MS, allowPrivateTargets: config.ALLOW_PRIVATE_TARGETS });
const deliveryQueue = new DeliveryQueue(connection, config.QUEUE_PREFIX, config.DELIVERY_RETRY_DELAYS_MS);
const metrics = createDispatcherMetrics(deliveryQueue.queue);
const metricsServer = await serveMetrics(metrics.registry, config.METRICS_PORT);
const worker = createDeliveryWorker(
  { prisma, client, allowPrivateTargets: config.ALLOW_PRIVATE_TARGETS, retryDelaysMs: config.DELIVERY_RETRY_DELAYS_MS, logger, metrics },
  {
    connection,
    prefix: config.QUEUE_PREFIX,
    concurrency: config.DISPATCHER_CONCURRENCY,
    lockDurationMs: config.DISPATCHER_LOCK_DURATION_MS,
    stalledIntervalMs: config.DISPATCHER_STALLED_INTERVAL_MS,
  },
);
const maintenance = await startMaintenance({
  connection,
  deliveries: deliveryQueue,
  prefix: config.QUEUE_PREFIX,
  prisma,
  retentionDays: config.EVENT_RETENTION_DAYS,
  retryDelaysMs: config.DELIVERY_RETRY_DELAYS_MS,
  timeoutMs: config.DELIVERY_TIMEOUT_MS,
  sweepEveryMs: config.SWEEP_INTERVAL_MS,
  sweepAfterMs: config.SWEEP_AFTER_MS,
  logger: getLogger("maintenance"),
});
logger.info("dispatcher started", { metricsPort: config.METRICS_PORT, concurrency: config.DISPATCHER_CONCURRENCY, prefix: config.QUEUE_PREFIX });

let stopping = false;
async function shutdown(signal: string) {
  if (stopping) return;
  stopping = true;
  logger.info("draining in-flight deliveries", { signal });
  // Bound the drain: an attempt lasts at most DELIVERY_TIMEOUT_MS plus its database write.
  const deadline = setTimeout(() => {
    logger.error("drain timed out");
    process.exit(1);
  }, config.DELIVERY_TIMEOUT_MS + 10_000);
  deadline.unref();
  await Promise.all([worker.close(), maintenance.close()]);
  metricsServer.close();
  await deliveryQueue.close();
  agent.destroy();
  await connection.quit().catch(() => undefined);
  await prisma.$disconnect();
  logger.info("dispatcher stopped");
  process.exit(0);
}
process.on("SIGTERM", () => void shutdown("SIGTERM"));
process.on("SIGINT", () => void shutdown("SIGINT"));

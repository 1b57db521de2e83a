/**
 * The dispatcher process: the relay that claims work (docs/scheduler.md) and a BullMQ worker that
 * signs and delivers it. Any number may run against one PostgreSQL and one Redis. SIGTERM stops
 * claiming, lets the attempts in flight finish and be recorded, then exits 0.
 */
import { randomUUID } from "node:crypto";
import os from "node:os";
import { createConfiguredDatabase } from "@mailhooks/db";
import { getLogger } from "@mailhooks/logger";
import { startService } from "@mailhooks/command-line/service";
import { ensurePayloadPartitions, queueBacklog } from "@mailhooks/delivery-state";
import { createConfiguredRedis, DeliveryQueue } from "@mailhooks/queue";
import { createHttpClient } from "./delivery/http-client.js";
import { startMaintenance } from "./maintenance.js";
import { startIdleListenCheck } from "./listen-idle.js";
import { createDispatcherMetrics, registerWorkQueueGauges, serveMetrics } from "./metrics.js";
import { startConfiguredRelay, type Relay } from "./relay.js";
import { createConfiguredDeliveryWorker } from "./worker.js";

const { config, logger } = startService("dispatcher");

const db = createConfiguredDatabase(config);
const { connection, keyPrefix } = createConfiguredRedis(config, "worker");
connection.on("error", (error: Error) => logger.warn("redis error", { error: error.message }));
// The relay's own connection fails fast while Redis is away (its claimed work is given back).
const relayConnection = createConfiguredRedis(config, "producer").connection;
relayConnection.on("error", () => undefined);
const { client, agent } = createHttpClient({ timeoutMs: config.DELIVERY_TIMEOUT_MS, allowPrivateTargets: config.ALLOW_PRIVATE_TARGETS });
const relayQueue = new DeliveryQueue(relayConnection, keyPrefix);
const metrics = createDispatcherMetrics(relayQueue.queue);
registerWorkQueueGauges(metrics.registry, () => queueBacklog(db.pool, config.QUEUE_PREFIX));
const metricsServer = await serveMetrics(metrics.registry, config.METRICS_PORT);
// The relay starts below; until then there is no relay to wake.
let relay: Relay | undefined;
const delivery = createConfiguredDeliveryWorker(config, {
  pool: db.pool,
  client,
  logger,
  metrics,
  connection,
  prefix: keyPrefix,
  onEnded: () => relay?.ended(),
});
relay = startConfiguredRelay(config, {
  pool: db.pool,
  queue: relayQueue,
  dispatcherId: `${os.hostname()}-${process.pid}-${randomUUID().slice(0, 8)}`,
  running: delivery.running,
  logger: getLogger("relay"),
  metrics,
});
// The coming days' payload partitions exist before the first event of the day needs one.
await ensurePayloadPartitions(db.pool).catch((error: Error) =>
  logger.warn("could not make payload partitions yet", { error: error.message }),
);
const maintenance = await startMaintenance({
  connection,
  prefix: keyPrefix,
  pool: db.pool,
  retentionDays: config.EVENT_RETENTION_DAYS,
  logger: getLogger("maintenance"),
  metrics,
});
const idleListen = startIdleListenCheck({
  pool: db.pool,
  idleMs: config.LISTEN_IDLE_HOURS * 3_600_000,
  queuePrefix: config.QUEUE_PREFIX,
  logger: getLogger("maintenance"),
});
logger.info("dispatcher started", {
  metricsPort: config.METRICS_PORT,
  concurrency: config.DISPATCHER_CONCURRENCY,
  prefix: config.QUEUE_PREFIX,
});

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
  // Claim nothing more (this dispatcher's slots leave the deployment's at once), let the attempts
  // in flight end with their leases renewed, then stop the relay.
  relay?.drain();
  idleListen.close();
  await Promise.all([delivery.close(), maintenance.close()]);
  await relay?.close();
  metricsServer.close();
  await relayQueue.close();
  agent.destroy();
  await Promise.all([connection.quit().catch(() => undefined), relayConnection.quit().catch(() => undefined)]);
  await db.close();
  logger.info("dispatcher stopped");
  process.exit(0);
}
process.on("SIGTERM", () => void shutdown("SIGTERM"));
process.on("SIGINT", () => void shutdown("SIGINT"));

/**
 * The dispatcher process: the outbox relay and a BullMQ worker that signs and delivers
 * envelopes. Any number may run against one PostgreSQL and one Redis. SIGTERM lets in-flight
 * attempts finish, then exits 0.
 */
import { createConfiguredDatabase } from "@mailhooks/db";
import { getLogger } from "@mailhooks/logger";
import { startService } from "@mailhooks/command-line/service";
import { attemptBudgetOf, ensurePayloadPartitions, schedulerBacklog } from "@mailhooks/delivery-state";
import { createConfiguredRedis, DeliveryQueue } from "@mailhooks/queue";
import { createAdmissionControl } from "@mailhooks/scheduler";
import { createHttpClient } from "./delivery/http-client.js";
import { startMaintenance } from "./maintenance.js";
import { createDispatcherMetrics, registerSchedulerGauges, serveMetrics } from "./metrics.js";
import { startConfiguredRelay, type Relay } from "./relay.js";
import { createConfiguredDeliveryWorker } from "./worker.js";

const { config, logger } = startService("dispatcher");

const db = createConfiguredDatabase(config);
const { connection, keyPrefix } = createConfiguredRedis(config, "worker");
connection.on("error", (error: Error) => logger.warn("redis error", { error: error.message }));
// The relay's own connection fails fast while Redis is away (its batch rolls back and waits).
const relayConnection = createConfiguredRedis(config, "producer").connection;
relayConnection.on("error", () => undefined);
const { client, agent } = createHttpClient({ timeoutMs: config.DELIVERY_TIMEOUT_MS, allowPrivateTargets: config.ALLOW_PRIVATE_TARGETS });
const deliveryQueue = new DeliveryQueue(connection, keyPrefix, attemptBudgetOf(config.DELIVERY_RETRY_DELAYS_MS));
const relayQueue = new DeliveryQueue(relayConnection, keyPrefix, attemptBudgetOf(config.DELIVERY_RETRY_DELAYS_MS));
relayQueue.queue.on("error", () => undefined);
const metrics = createDispatcherMetrics(deliveryQueue.queue);
const metricsServer = await serveMetrics(metrics.registry, config.METRICS_PORT);
// The relay starts below; until then there is no relay to wake.
let relay: Relay | undefined;
const worker = createConfiguredDeliveryWorker(config, {
  pool: db.pool,
  client,
  logger,
  metrics,
  connection,
  prefix: keyPrefix,
  queuePrefix: config.QUEUE_PREFIX,
  onRoom: () => relay?.room(),
});
// The scheduler's state as the relay (slow webhooks) and the gauges read it, over the relay's
// connection, which fails fast while Redis is away.
const schedulerState = createAdmissionControl({
  redis: relayConnection,
  keyPrefix,
  localConcurrency: config.DISPATCHER_CONCURRENCY,
  slowAttemptMs: config.DISPATCHER_SLOW_ATTEMPT_MS,
});
registerSchedulerGauges(metrics.registry, {
  backlog: async () =>
    schedulerBacklog(
      db.pool,
      config.QUEUE_PREFIX,
      config.DISPATCHER_WEBHOOK_JOB_LIMIT,
      await schedulerState.webhookClasses().catch(() => undefined),
    ),
  rateLimited: async () => {
    const state = await schedulerState.state();
    return { waiting: state.waitingForRateLimit, webhooks: state.rateLimitedWebhooks };
  },
});
relay = startConfiguredRelay(config, {
  pool: db.pool,
  queue: relayQueue,
  webhookClasses: () => schedulerState.webhookClasses(),
  logger: getLogger("relay"),
  metrics,
});
// The coming days' payload partitions exist before the first event of the day needs one.
await ensurePayloadPartitions(db.pool).catch((error: Error) =>
  logger.warn("could not make payload partitions yet", { error: error.message }),
);
const maintenance = await startMaintenance({
  connection,
  deliveries: deliveryQueue,
  prefix: keyPrefix,
  queuePrefix: config.QUEUE_PREFIX,
  pool: db.pool,
  retentionDays: config.EVENT_RETENTION_DAYS,
  retryDelaysMs: config.DELIVERY_RETRY_DELAYS_MS,
  sweepEveryMs: config.SWEEP_INTERVAL_MS,
  sweepAfterMs: config.SWEEP_AFTER_MS,
  sweepBatchSize: config.SWEEP_BATCH_SIZE,
  queueVacuumEveryMs: config.OUTBOX_VACUUM_INTERVAL_MS,
  logger: getLogger("maintenance"),
  metrics,
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
  await Promise.all([relay?.close(), worker.close(), maintenance.close()]);
  metricsServer.close();
  await Promise.all([deliveryQueue.close(), relayQueue.close()]);
  agent.destroy();
  await Promise.all([connection.quit().catch(() => undefined), relayConnection.quit().catch(() => undefined)]);
  await db.close();
  logger.info("dispatcher stopped");
  process.exit(0);
}
process.on("SIGTERM", () => void shutdown("SIGTERM"));
process.on("SIGINT", () => void shutdown("SIGINT"));

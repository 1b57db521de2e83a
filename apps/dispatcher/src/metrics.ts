import http from "node:http";
import type { Queue } from "bullmq";
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from "prom-client";
import type { QueueBacklog } from "@mailhooks/delivery-state";
import { registerQueueDepthGauge } from "@mailhooks/queue";

/**
 * The dispatcher's Prometheus metrics, served on METRICS_PORT at /metrics. Durations are in
 * seconds, as Prometheus expects.
 */
export interface DispatcherMetrics {
  registry: Registry;
  /** Attempts by trigger (initial, retry, replay, test) and outcome (success, failure). */
  deliveries: Counter<"trigger" | "outcome">;
  attemptDuration: Histogram<"trigger">;
  /** From the event's ingest to a successful first or retried delivery. */
  endToEndLatency: Histogram;
  retriesScheduled: Counter;
  /** Units of work this process's relay claimed and handed to the queue. */
  claimed: Counter;
  /** Jobs whose attempt was not made (PostgreSQL unreachable, a secret no key opens), by job name: their work is claimed again. */
  postponed: Counter<"job">;
  /** Work ended failed without an attempt, by job name and reason (error: a poison job; expired: its leases kept expiring). */
  jobsFailed: Counter<"job" | "reason">;
  /** Times this dispatcher found the maintenance job schedulers gone from Redis and made them again. */
  schedulersRestored: Counter;
  /** Webhooks disabled because every attempt failed for WEBHOOK_AUTO_DISABLE_AFTER_HOURS. */
  webhooksAutoDisabled: Counter;
  /** Operational events made by this dispatcher, by kind (webhook.failing, webhook.recovered, webhook.disabled, destination.failed). */
  operationalEvents: Counter<"kind">;
}

const LATENCY_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900];

export function createDispatcherMetrics(queue?: Queue): DispatcherMetrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  const metrics: DispatcherMetrics = {
    registry,
    deliveries: new Counter({
      name: "webhook_delivery_attempts_total",
      help: "Delivery attempts by trigger and outcome",
      labelNames: ["trigger", "outcome"],
      registers: [registry],
    }),
    attemptDuration: new Histogram({
      name: "webhook_delivery_attempt_duration_seconds",
      help: "Duration of one delivery attempt",
      labelNames: ["trigger"],
      buckets: LATENCY_BUCKETS,
      registers: [registry],
    }),
    endToEndLatency: new Histogram({
      name: "webhook_delivery_latency_seconds",
      help: "From event ingest to its successful delivery",
      buckets: LATENCY_BUCKETS,
      registers: [registry],
    }),
    retriesScheduled: new Counter({
      name: "webhook_retries_scheduled_total",
      help: "Retries scheduled after a failed attempt",
      registers: [registry],
    }),
    claimed: new Counter({
      name: "webhook_work_claimed_total",
      help: "Units of work claimed and handed to the queue",
      registers: [registry],
    }),
    postponed: new Counter({
      name: "webhook_jobs_postponed_total",
      help: "Jobs whose attempt was not made (PostgreSQL unreachable, an unreadable secret); their work is claimed again",
      labelNames: ["job"],
      registers: [registry],
    }),
    jobsFailed: new Counter({
      name: "webhook_jobs_failed_total",
      help: "Work ended failed without an attempt (never sent again), by reason",
      labelNames: ["job", "reason"],
      registers: [registry],
    }),
    webhooksAutoDisabled: new Counter({
      name: "webhook_auto_disabled_total",
      help: "Webhooks disabled because every attempt failed for WEBHOOK_AUTO_DISABLE_AFTER_HOURS",
      registers: [registry],
    }),
    operationalEvents: new Counter({
      name: "webhook_operational_events_total",
      help: "Operational events made, by kind (each then delivered to the webhooks subscribed to it)",
      labelNames: ["kind"],
      registers: [registry],
    }),
    schedulersRestored: new Counter({
      name: "webhook_maintenance_schedulers_restored_total",
      help: "Times the maintenance job schedulers were found gone from Redis and made again",
      registers: [registry],
    }),
  };
  if (queue) registerQueueDepthGauge(registry, queue);
  return metrics;
}

/**
 * The work queue's gauges (docs/scheduler.md), read from PostgreSQL at each scrape:
 * `webhook_work_items{state}` the units of work waiting (for their turn, their retry's time, a
 * paused webhook) and leased (running, or on their way to a worker), `webhook_webhooks_ready` the
 * webhooks in the round, and `webhook_webhooks_paused` those paused. One reading per scrape
 * serves the three (prom-client collects them at once); a reading that fails leaves the gauges as
 * they were.
 */
export function registerWorkQueueGauges(registry: Registry, read: () => Promise<QueueBacklog>): void {
  let reading: Promise<QueueBacklog | null> | null = null;
  const readOnce = () =>
    (reading ??= read()
      .catch(() => null)
      .finally(() => (reading = null)));
  new Gauge({
    name: "webhook_work_items",
    help: "Units of work in the work queue, by state: waiting or leased",
    labelNames: ["state"],
    registers: [registry],
    async collect() {
      const backlog = await readOnce();
      if (!backlog) return;
      this.set({ state: "waiting" }, backlog.waiting);
      this.set({ state: "leased" }, backlog.leased);
    },
  });
  new Gauge({
    name: "webhook_webhooks_ready",
    help: "Webhooks in the round: with waiting work that may start",
    registers: [registry],
    async collect() {
      const backlog = await readOnce();
      if (backlog) this.set(backlog.readyWebhooks);
    },
  });
  new Gauge({
    name: "webhook_webhooks_paused",
    help: "Webhooks paused (their work waits until they are resumed)",
    registers: [registry],
    async collect() {
      const backlog = await readOnce();
      if (backlog) this.set(backlog.pausedWebhooks);
    },
  });
}

/** Records one attempt's outcome. */
export function observeAttempt(metrics: DispatcherMetrics, trigger: string, ok: boolean, durationMs: number): void {
  metrics.deliveries.inc({ trigger, outcome: ok ? "success" : "failure" });
  metrics.attemptDuration.observe({ trigger }, durationMs / 1000);
}

/** Serves GET /metrics (and /healthz) on `port`; resolves once listening. */
export function serveMetrics(registry: Registry, port: number): Promise<http.Server> {
  const server = http.createServer((req, res) => {
    if (req.url === "/metrics") return void answerMetrics(registry, res);
    if (req.url === "/healthz") return void res.writeHead(200, { "content-type": "application/json" }).end('{"status":"ok"}');
    res.writeHead(404, { "content-type": "application/json" }).end('{"error":{"code":"not_found","message":"not found"}}');
  });
  return new Promise((resolve) => server.listen(port, () => resolve(server)));
}

async function answerMetrics(registry: Registry, res: http.ServerResponse): Promise<void> {
  try {
    const body = await registry.metrics();
    res.writeHead(200, { "content-type": registry.contentType }).end(body);
  } catch (error) {
    res.writeHead(503, { "content-type": "text/plain" }).end(`metrics unavailable: ${(error as Error).message}`);
  }
}

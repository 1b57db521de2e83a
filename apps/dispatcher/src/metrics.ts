import http from "node:http";
import type { Queue } from "bullmq";
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from "prom-client";
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
  /** Outbox rows moved into the queue by this process's relay. */
  relayed: Counter;
  /** Jobs postponed by an outage (PostgreSQL or Redis unreachable), by job name. */
  postponed: Counter<"job">;
  /** Jobs failed for good, by job name and reason (error, invalid_job, stalled, postponed_too_often,
   * invalid_outbox_row: the relay ended its work; failed_job_swept: the sweeper ended the still
   * pending work of a job that had failed for good). */
  jobsFailed: Counter<"job" | "reason">;
  /** Pending work whose job was lost, queued again by the sweeper. */
  lostWorkRequeued: Counter;
  /** Jobs taken over from a dispatcher that died (their lock expired). */
  stalledJobs: Counter;
  /** Times this dispatcher found the maintenance job schedulers gone from Redis and made them again. */
  schedulersRestored: Counter;
  /** Webhooks disabled because every attempt failed for WEBHOOK_AUTO_DISABLE_AFTER_HOURS. */
  webhooksAutoDisabled: Counter;
  /** Attempts the fair scheduler held back, by reason (share, rate_limit); none used an attempt. */
  held: Counter<"reason">;
  /** Leases dropped by the lease keeper because their job was gone from Redis. */
  leasesDropped: Counter;
}

/** What the scheduler gauges read at each scrape (docs/scheduler.md). */
export interface SchedulerReadings {
  /** Work waiting for its webhook's share in the outbox, and webhooks at their job limit. */
  backlog: () => Promise<{ waiting: number; webhooksAtLimit: number }>;
  /** Jobs waiting for a rate_limit turn, and webhooks whose rate_limit holds work back. */
  rateLimited: () => Promise<{ waiting: number; webhooks: number }>;
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
    relayed: new Counter({ name: "webhook_outbox_relayed_total", help: "Outbox rows moved into the queue", registers: [registry] }),
    postponed: new Counter({
      name: "webhook_jobs_postponed_total",
      help: "Jobs postponed because PostgreSQL or Redis was unreachable",
      labelNames: ["job"],
      registers: [registry],
    }),
    jobsFailed: new Counter({
      name: "webhook_jobs_failed_total",
      help: "Jobs failed for good (never sent again), by reason",
      labelNames: ["job", "reason"],
      registers: [registry],
    }),
    stalledJobs: new Counter({
      name: "webhook_jobs_stalled_total",
      help: "Jobs taken over from a dispatcher that died (lock expired)",
      registers: [registry],
    }),
    webhooksAutoDisabled: new Counter({
      name: "webhook_auto_disabled_total",
      help: "Webhooks disabled because every attempt failed for WEBHOOK_AUTO_DISABLE_AFTER_HOURS",
      registers: [registry],
    }),
    schedulersRestored: new Counter({
      name: "webhook_maintenance_schedulers_restored_total",
      help: "Times the maintenance job schedulers were found gone from Redis and made again",
      registers: [registry],
    }),
    lostWorkRequeued: new Counter({
      name: "webhook_lost_work_requeued_total",
      help: "Pending work whose job was lost, queued again by the sweeper",
      registers: [registry],
    }),
    held: new Counter({
      name: "webhook_attempts_held_total",
      help: "Attempts held back by the fair scheduler, by reason (share, rate_limit); none used an attempt",
      labelNames: ["reason"],
      registers: [registry],
    }),
    leasesDropped: new Counter({
      name: "webhook_leases_dropped_total",
      help: "Scheduler leases dropped because their job was gone from Redis",
      registers: [registry],
    }),
  };
  if (queue) registerQueueDepthGauge(registry, queue);
  return metrics;
}

/**
 * The scheduler's gauges: work waiting by reason (`share`: in the outbox behind its webhook's job
 * limit; `rate_limit`: jobs waiting for a turn of their webhook's rate_limit) and webhooks at
 * their limit by reason. Read at each scrape; a reading that fails leaves the gauge as it was.
 */
export function registerSchedulerGauges(registry: Registry, readings: SchedulerReadings): void {
  type Backlog = Awaited<ReturnType<SchedulerReadings["backlog"]>>;
  type RateLimited = Awaited<ReturnType<SchedulerReadings["rateLimited"]>>;
  const byReason = (name: string, help: string, share: (b: Backlog) => number, rateLimit: (l: RateLimited) => number) =>
    new Gauge({
      name,
      help,
      labelNames: ["reason"],
      registers: [registry],
      async collect() {
        const [backlog, limited] = await Promise.all([readings.backlog().catch(() => null), readings.rateLimited().catch(() => null)]);
        if (backlog) this.set({ reason: "share" }, share(backlog));
        if (limited) this.set({ reason: "rate_limit" }, rateLimit(limited));
      },
    });
  byReason(
    "webhook_work_waiting",
    "Work waiting for its turn, by reason: share (in the outbox, its webhook holds its job limit) or rate_limit (queued for a rate_limit turn)",
    (b) => b.waiting,
    (l) => l.waiting,
  );
  byReason(
    "webhook_webhooks_at_limit",
    "Webhooks at their limit, by reason: share (holding their job limit in the queue) or rate_limit (their rate_limit holds work back)",
    (b) => b.webhooksAtLimit,
    (l) => l.webhooks,
  );
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

import type { Queue } from "bullmq";
import { Gauge, type Registry } from "prom-client";

/**
 * `webhook_queue_jobs{state}`: the jobs of the deliveries queue (the slots' lane) by state, read
 * from Redis at each scrape; the reserve's lane holds no more than its running attempts. Served by the API and by every dispatcher, so one scrape target is enough.
 */
export function registerQueueDepthGauge(registry: Registry, queue: Queue): void {
  new Gauge({
    name: "webhook_queue_jobs",
    help: "Jobs of the deliveries queue by state",
    labelNames: ["state"],
    registers: [registry],
    async collect() {
      const counts = await queue.getJobCounts("waiting", "active", "delayed", "failed", "prioritized");
      for (const [state, count] of Object.entries(counts)) this.set({ state }, count);
    },
  });
}

import { Registry } from "prom-client";
import type { QueueBacklog } from "@mailhooks/delivery-state";
import { registerWorkQueueGauges } from "./metrics.js";

/**
 * The work queue's gauges (docs/scheduler.md): work waiting and leased, and webhooks in the round,
 * read at each scrape. A reading that fails leaves the gauges as they were instead of failing the
 * scrape.
 */
describe("work queue gauges", () => {
  test("waiting, leased and ready webhooks from one reading per scrape; a failed reading keeps the last values", async () => {
    const registry = new Registry();
    let backlog: QueueBacklog | Error = { waiting: 870, leased: 64, readyWebhooks: 3, pausedWebhooks: 2 };
    let reads = 0;
    registerWorkQueueGauges(registry, async () => {
      reads++;
      if (backlog instanceof Error) throw backlog;
      return backlog;
    });
    let text = await registry.metrics();
    expect(text).toContain('webhook_work_items{state="waiting"} 870');
    expect(text).toContain('webhook_work_items{state="leased"} 64');
    expect(text).toContain("webhook_webhooks_ready 3");
    expect(text).toContain("webhook_webhooks_paused 2");
    // One reading (one query) per scrape serves the three gauges.
    expect(reads).toBe(1);
    backlog = new Error("PostgreSQL away");
    text = await registry.metrics();
    expect(text).toContain('webhook_work_items{state="waiting"} 870');
  });
});

import { Registry } from "prom-client";
import { registerSchedulerGauges } from "./metrics.js";

/**
 * The scheduler's gauges (issue "No endpoint waits for another", item 7; docs/scheduler.md):
 * work waiting and webhooks at their limit, by reason, read at each scrape. A reading that fails
 * leaves the gauge as it was instead of failing the scrape.
 */
describe("scheduler gauges", () => {
  test("work waiting and webhooks at their limit, by reason; a failed reading keeps the last value", async () => {
    const registry = new Registry();
    let backlog: { waiting: number; webhooksAtLimit: number } | Error = { waiting: 870, webhooksAtLimit: 1 };
    registerSchedulerGauges(registry, {
      backlog: async () => {
        if (backlog instanceof Error) throw backlog;
        return backlog;
      },
      rateLimited: async () => ({ waiting: 12, webhooks: 2 }),
    });
    const scrape = async () => registry.metrics();
    let text = await scrape();
    expect(text).toContain('webhook_work_waiting{reason="share"} 870');
    expect(text).toContain('webhook_work_waiting{reason="rate_limit"} 12');
    expect(text).toContain('webhook_webhooks_at_limit{reason="share"} 1');
    expect(text).toContain('webhook_webhooks_at_limit{reason="rate_limit"} 2');
    backlog = new Error("PostgreSQL away");
    text = await scrape();
    expect(text).toContain('webhook_work_waiting{reason="share"} 870');
  });
});

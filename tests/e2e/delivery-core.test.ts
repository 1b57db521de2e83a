import path from "node:path";
import type { Arrival } from "@mailhooks/receiver";
import { sampleData, startStack, waitUntil, type Stack } from "../support/stack.js";
import { createHook, emailArrivals, startHookReceiver, type HookReceiver } from "../support/hooks.js";
import { startDispatcherOn, type InProcessDispatcher } from "../support/delivery-worker.js";
import { killAll, ROOT, startService, serviceEnv } from "../chaos/support/processes.js";

/**
 * The delivery core's one decision (docs/scheduler.md):
 * - a webhook's never-tried events do not wait behind its own retries (a retry waiting for its
 *   delay holds no slot);
 * - cancelled work takes no rate_limit turn;
 * - limits are the deployment's, whatever the number of dispatchers;
 * - `rate_limit` holds on PostgreSQL's clock, whatever a dispatcher's clock says.
 */
const DEADLINE_MS = 1_000;

/** The most arrivals in any window of `windowMs` that starts at an arrival. */
function mostInAnyWindow(arrivals: Arrival[], windowMs: number): number {
  const times = arrivals.map((a) => a.receivedAt).sort((a, b) => a - b);
  let most = 0;
  for (let i = 0, j = 0; i < times.length; i++) {
    while (times[j] < times[i] - windowMs + 1) j++;
    most = Math.max(most, i - j + 1);
  }
  return most;
}

/** Sends `count` events of `eventType` in one batch; their messageIds. */
async function sendBatch(stack: Stack, eventType: string, count: number): Promise<Set<string>> {
  const events = Array.from({ length: count }, () => ({ event_type: eventType, data: sampleData(eventType) }));
  const res = await stack.api("POST", "/v1/events/batch", { events });
  expect(res.status).toBe(201);
  return new Set(events.map((e) => e.data.messageId as string));
}

/** Initial attempts (attempt 0) recorded for `webhookId`. */
async function initialAttempts(stack: Stack, webhookId: string): Promise<number> {
  const { rows } = await stack.pool.query<{ n: number }>(
    "SELECT count(*)::int AS n FROM deliveries WHERE webhook_id = $1 AND trigger = 'initial'",
    [webhookId],
  );
  return rows[0].n;
}

describe("the delivery core", () => {
  let stack: Stack;
  let hr: HookReceiver;
  /** Paths whose receiver hangs (past the deadline) until the test lets them answer. */
  const hanging = new Set<string>();

  beforeAll(async () => {
    stack = await startStack({
      env: {
        DELIVERY_TIMEOUT_MS: String(DEADLINE_MS),
        // Retries far in the future: what is measured is what happens while they wait.
        DELIVERY_RETRY_DELAYS_MS: "20000,40000,60000",
        WEBHOOK_AUTO_DISABLE_AFTER_HOURS: "0",
      },
    });
    hr = await startHookReceiver(stack, (arrival) =>
      arrival.event !== "webhook.test" && hanging.has(arrival.path) ? { delayMs: 60_000 } : {},
    );
  }, 60_000);
  afterAll(async () => {
    await stack?.close();
    await hr?.receiver.close().catch(() => undefined);
  });

  test("a hanging webhook's never-tried events get their initial attempts at its full share while its retries wait, and flow once it answers", async () => {
    hanging.add("/behind-retries");
    const hook = await createHook(stack, hr, "/behind-retries", ["message.sent"]);
    await sendBatch(stack, "message.sent", 60);
    // 16 slots, a 1 s deadline: 60 initial attempts take four rounds of about 1 s. Their retries
    // (20 s away) hold nothing meanwhile.
    await waitUntil(
      () => initialAttempts(stack, hook.id),
      (n) => n === 60,
      12_000,
    );
    // The endpoint answers again: new events do not wait behind the 60 retries.
    hanging.delete("/behind-retries");
    const fresh = await sendBatch(stack, "message.sent", 30);
    await hr.receiver.waitFor((all) => emailArrivals(all, "/behind-retries").filter((a) => fresh.has(a.messageId!)).length === 30, 5_000);
    await stack.api("DELETE", `/v1/webhooks/${hook.id}`);
  }, 60_000);

  test("work cancelled by a disable takes no rate_limit turn: after 40 cancelled events, a new one arrives within a turn or two", async () => {
    const hook = await createHook(stack, hr, "/cancelled-turns", ["message.delivered"]);
    expect((await stack.api("PATCH", `/v1/webhooks/${hook.id}`, { rate_limit: 1 })).status).toBe(200);
    await sendBatch(stack, "message.delivered", 40);
    await hr.receiver.waitFor((all) => emailArrivals(all, "/cancelled-turns").length >= 1, 10_000);
    expect((await stack.api("PATCH", `/v1/webhooks/${hook.id}`, { status: "disabled" })).status).toBe(200);
    expect((await stack.api("PATCH", `/v1/webhooks/${hook.id}`, { status: "enabled" })).status).toBe(200);
    const started = Date.now();
    const last = await sendBatch(stack, "message.delivered", 1);
    const arrivals = await hr.receiver.waitFor((all) => emailArrivals(all, "/cancelled-turns").some((a) => last.has(a.messageId!)), 10_000);
    const arrived = emailArrivals(arrivals, "/cancelled-turns").find((a) => last.has(a.messageId!))!;
    // One turn is 1.15 s at rate_limit 1; the cancelled 39 would have taken 45 s.
    expect(arrived.receivedAt - started).toBeLessThan(5_000);
    await stack.api("DELETE", `/v1/webhooks/${hook.id}`);
  }, 60_000);

  describe("with a second dispatcher", () => {
    let second: InProcessDispatcher;
    beforeAll(() => {
      second = startDispatcherOn(stack, {
        QUEUE_PREFIX: stack.prefix,
        DELIVERY_TIMEOUT_MS: String(DEADLINE_MS),
        DELIVERY_RETRY_DELAYS_MS: "20000,40000,60000",
        WEBHOOK_AUTO_DISABLE_AFTER_HOURS: "0",
      });
    });
    afterAll(async () => {
      await second?.close();
      await killAll();
    });

    test("a hanging webhook holds at most the deployment's slots and reserve, however many dispatchers claim", async () => {
      hanging.add("/two-dispatchers");
      const hook = await createHook(stack, hr, "/two-dispatchers", ["message.opened"]);
      await sendBatch(stack, "message.opened", 100);
      // Two dispatchers of 16 slots and 2 reserve slots each: 36 at most, held while the
      // attempts hang; each dispatcher alone would have allowed its own.
      let most = 0;
      await waitUntil(
        async () => {
          const { rows } = await stack.pool.query<{ n: number }>(
            "SELECT count(*)::int AS n FROM work_items WHERE webhook_id = $1 AND leased_until > now()",
            [hook.id],
          );
          most = Math.max(most, rows[0].n);
          return initialAttempts(stack, hook.id);
        },
        (n) => n === 100,
        20_000,
        20,
      );
      expect(most).toBeGreaterThan(16);
      expect(most).toBeLessThanOrEqual(36);
      hanging.delete("/two-dispatchers");
      await stack.api("DELETE", `/v1/webhooks/${hook.id}`);
    }, 60_000);

    test("rate_limit 5 holds on PostgreSQL's clock with a third dispatcher whose clock is 2 s ahead", async () => {
      const skewed = startService(
        "skewed-dispatcher",
        "apps/dispatcher/src/main.ts",
        serviceEnv({
          QUEUE_PREFIX: stack.prefix,
          DISPATCHER_CONCURRENCY: "16",
          DELIVERY_TIMEOUT_MS: String(DEADLINE_MS),
          TEST_CLOCK_OFFSET_MS: "2000",
        }),
        { nodeFlags: ["--import", path.join(ROOT, "tests/support/skewed-clock.mjs")] },
      );
      await waitUntil(
        async () =>
          (await stack.pool.query<{ n: number }>("SELECT count(*)::int AS n FROM dispatchers WHERE queue_prefix = $1", [stack.prefix]))
            .rows[0].n,
        (n) => n === 3,
        30_000,
      );
      const hook = await createHook(stack, hr, "/skewed-clock", ["message.clicked"]);
      expect((await stack.api("PATCH", `/v1/webhooks/${hook.id}`, { rate_limit: 5 })).status).toBe(200);
      const sent = await sendBatch(stack, "message.clicked", 30);
      const arrivals = await hr.receiver.waitFor(
        (all) => emailArrivals(all, "/skewed-clock").filter((a) => sent.has(a.messageId!)).length === 30,
        30_000,
      );
      expect(mostInAnyWindow(emailArrivals(arrivals, "/skewed-clock"), 1_000)).toBeLessThanOrEqual(5);
      skewed.child.kill("SIGTERM");
      await skewed.exited;
      await stack.api("DELETE", `/v1/webhooks/${hook.id}`);
    }, 90_000);
  });
});

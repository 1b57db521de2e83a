import type { Arrival } from "@mailhooks/receiver";
import { sampleData, startStack, waitUntil, type Stack } from "../support/stack.js";
import { createHook, envelopeOf, eventOf, startHookReceiver, type HookReceiver } from "../support/hooks.js";
import { killAll, startDispatcher } from "../chaos/support/processes.js";

/**
 * Operational events (docs/api.md, "Operational events"): `webhook.failing` once when a
 * webhook's attempts failed 5 times in a row, `webhook.recovered` at its first 2xx after that,
 * `webhook.disabled` (manual or failing), `destination.failed` for each destination that ends
 * failed. They are events of the account, delivered to its webhooks subscribed to them, never to
 * the webhook they are about, and none is made about their own delivery.
 */
const OPERATIONAL = ["webhook.failing", "webhook.recovered", "webhook.disabled", "destination.failed"];

/** Operational envelopes that reached `path`, parsed. */
function operational(arrivals: Arrival[], path: string, kind?: string) {
  return arrivals
    .filter((a) => a.path === path && OPERATIONAL.includes(eventOf(a) ?? ""))
    .map(envelopeOf)
    .filter((e) => kind === undefined || e.event === kind);
}

describe("operational events", () => {
  let stack: Stack;
  let hr: HookReceiver;
  /** Paths whose receiver answers 500 to email events. */
  const failing = new Set<string>();

  beforeAll(async () => {
    stack = await startStack({ env: { DELIVERY_RETRY_DELAYS_MS: "100,100,100", WEBHOOK_AUTO_DISABLE_AFTER_HOURS: "0" } });
    hr = await startHookReceiver(stack, (arrival) =>
      failing.has(arrival.path) && arrival.event?.startsWith("message.") ? { status: 500 } : {},
    );
  }, 60_000);
  afterAll(async () => {
    await stack?.close();
    await hr?.receiver.close().catch(() => undefined);
  });

  test("a failing webhook: one webhook.failing, one destination.failed per event, one webhook.recovered, webhook.disabled (manual); to the observer only", async () => {
    failing.add("/failing");
    // The failing webhook subscribes to the operational kinds too: it must get none about itself.
    const hook = await createHook(stack, hr, "/failing", ["message.sent", ...OPERATIONAL]);
    const observer = await createHook(stack, hr, "/observer", OPERATIONAL);
    const events: string[] = [];
    for (let i = 0; i < 5; i++) {
      const res = await stack.api("POST", "/v1/events", { event_type: "message.sent", data: sampleData("message.sent") });
      events.push(res.body.event_id as string);
    }
    const arrivals = await hr.receiver.waitFor((all) => operational(all, "/observer", "destination.failed").length === 5, 30_000);
    const failed = operational(arrivals, "/observer", "destination.failed");
    expect(failed.map((e) => e.data.eventId).sort()).toEqual([...events].sort());
    for (const e of failed)
      expect(e.data).toEqual({
        eventId: e.data.eventId,
        eventType: "message.sent",
        webhookId: hook.id,
        url: hook.url,
        attempts: 4,
        lastStatus: 500,
        lastError: null,
      });
    expect(Object.keys(failed[0].data)).toEqual(["eventId", "eventType", "webhookId", "url", "attempts", "lastStatus", "lastError"]);
    const failingNotice = operational(arrivals, "/observer", "webhook.failing");
    expect(failingNotice).toHaveLength(1);
    expect(failingNotice[0].data).toMatchObject({
      webhookId: hook.id,
      url: hook.url,
      consecutiveFailures: 5,
      lastStatus: 500,
      lastError: null,
    });
    expect(Object.keys(failingNotice[0].data)).toEqual([
      "webhookId",
      "url",
      "failingSince",
      "consecutiveFailures",
      "lastStatus",
      "lastError",
    ]);

    // It answers again: one webhook.recovered at its first 2xx.
    failing.delete("/failing");
    await stack.api("POST", "/v1/events", { event_type: "message.sent", data: sampleData("message.sent") });
    await stack.api("POST", "/v1/events", { event_type: "message.sent", data: sampleData("message.sent") });
    const recovered = await hr.receiver.waitFor((all) => operational(all, "/observer", "webhook.recovered").length === 1, 20_000);
    expect(operational(recovered, "/observer", "webhook.recovered")[0].data).toMatchObject({ webhookId: hook.id, url: hook.url });

    expect((await stack.api("PATCH", `/v1/webhooks/${hook.id}`, { status: "disabled" })).status).toBe(200);
    const disabled = await hr.receiver.waitFor((all) => operational(all, "/observer", "webhook.disabled").length === 1, 20_000);
    expect(operational(disabled, "/observer", "webhook.disabled")[0].data).toEqual({ webhookId: hook.id, url: hook.url, reason: "manual" });

    // Never to the webhook they are about; and each is an event of the account, listed.
    expect(operational(hr.receiver.arrivals, "/failing")).toEqual([]);
    const listed = await stack.api("GET", "/v1/events?event_type=destination.failed");
    expect(listed.status).toBe(200);
    expect(listed.body.data.length).toBe(5);
    expect(listed.body.data[0]).toMatchObject({ event_type: "destination.failed", inbox_id: null });
    expect(operational(hr.receiver.arrivals, "/observer", "webhook.failing")).toHaveLength(1);
    await stack.api("DELETE", `/v1/webhooks/${observer.id}`);
  }, 90_000);

  test("no notice of a notice: an observer that fails its operational deliveries makes none", async () => {
    failing.add("/failing-2");
    const hook = await createHook(stack, hr, "/failing-2", ["message.opened"]);
    // This observer answers 500 to everything but the test event: its operational deliveries fail.
    const observer = await createHook(stack, hr, "/observer-2", ["destination.failed", "webhook.failing"]);
    const watcher = await createHook(stack, hr, "/watcher", ["destination.failed", "webhook.failing"]);
    failing.add("/observer-2");
    await stack.api("POST", "/v1/events", { event_type: "message.opened", data: sampleData("message.opened") });
    await hr.receiver.waitFor((all) => operational(all, "/watcher", "destination.failed").length === 1, 30_000);
    // The observer's own failed deliveries of operational events become no destination.failed.
    await waitUntil(
      async () =>
        (
          await stack.pool.query<{ n: number }>(
            "SELECT count(*)::int AS n FROM destinations WHERE webhook_id = $1 AND status = 'pending'",
            [observer.id],
          )
        ).rows[0].n,
      (n) => n === 0,
      30_000,
    );
    const watched = operational(hr.receiver.arrivals, "/watcher", "destination.failed");
    expect(watched.map((e) => e.data.webhookId)).toEqual([hook.id]);
    for (const h of [hook, observer, watcher]) await stack.api("DELETE", `/v1/webhooks/${h.id}`);
  }, 90_000);
});

describe("operational events with two dispatchers, one killed mid-streak", () => {
  let stack: Stack;
  let hr: HookReceiver;
  beforeAll(async () => {
    stack = await startStack({
      env: {
        DELIVERY_RETRY_DELAYS_MS: "300,300,300",
        WEBHOOK_AUTO_DISABLE_AFTER_HOURS: "0.0005",
        DISPATCHER_VISIBILITY_TIMEOUT_MS: "2000",
      },
    });
    hr = await startHookReceiver(stack, (arrival) =>
      arrival.path === "/streak" && arrival.event?.startsWith("message.") ? { status: 503 } : {},
    );
  }, 60_000);
  afterAll(async () => {
    await killAll();
    await stack?.close();
    await hr?.receiver.close().catch(() => undefined);
  });

  test("exactly one webhook.failing, and auto-disable makes one webhook.disabled (failing)", async () => {
    const other = startDispatcher("second-dispatcher", {
      QUEUE_PREFIX: stack.prefix,
      DELIVERY_RETRY_DELAYS_MS: "300,300,300",
      WEBHOOK_AUTO_DISABLE_AFTER_HOURS: "0.0005",
      DISPATCHER_VISIBILITY_TIMEOUT_MS: "2000",
    });
    const hook = await createHook(stack, hr, "/streak", ["message.clicked"]);
    await createHook(stack, hr, "/streak-observer", OPERATIONAL);
    // The creation's test event is answered 200: recorded after the first failures, it would end
    // their streak, and fewer than the 20 failed events auto-disable needs would be left.
    await waitUntil(
      async () =>
        (
          await stack.pool.query<{ n: number }>(
            "SELECT count(*)::int AS n FROM deliveries WHERE webhook_id = $1 AND response_status = 200",
            [hook.id],
          )
        ).rows[0].n,
      (n) => n === 1,
      30_000,
    );
    for (let i = 0; i < 12; i++)
      await stack.api("POST", "/v1/events", { event_type: "message.clicked", data: sampleData("message.clicked") });
    await waitUntil(
      async () =>
        (await stack.pool.query<{ n: number }>("SELECT count(*)::int AS n FROM deliveries WHERE webhook_id = $1", [hook.id])).rows[0].n,
      (n) => n >= 6,
      30_000,
    );
    other.child.kill("SIGKILL");
    await other.exited;
    // Once the streak is older than the 1.8 s of WEBHOOK_AUTO_DISABLE_AFTER_HOURS, twelve more
    // events: the failure that makes its 20th failed event disables it. (Sent at once, all 24 may
    // fail within 1.8 s of the first, and nothing fails after to disable it.)
    await waitUntil(
      async () =>
        (
          await stack.pool.query<{ old: boolean }>(
            "SELECT coalesce(failing_since < now() - interval '1.9 seconds', false) AS old FROM webhooks WHERE id = $1",
            [hook.id],
          )
        ).rows[0].old,
      (old) => old,
      30_000,
    );
    for (let i = 0; i < 12; i++)
      await stack.api("POST", "/v1/events", { event_type: "message.clicked", data: sampleData("message.clicked") });
    const arrivals = await hr.receiver.waitFor((all) => operational(all, "/streak-observer", "webhook.disabled").length === 1, 60_000);
    expect(operational(arrivals, "/streak-observer", "webhook.disabled")[0].data).toEqual({
      webhookId: hook.id,
      url: hook.url,
      reason: "failing",
    });
    expect(operational(hr.receiver.arrivals, "/streak-observer", "webhook.failing")).toHaveLength(1);
  }, 120_000);
});

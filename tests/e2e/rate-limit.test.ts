import type { Arrival } from "@mailhooks/receiver";
import { sampleData, startStack, type Stack } from "../support/stack.js";
import { createHook, emailArrivals, startHookReceiver, type HookReceiver } from "../support/hooks.js";
import { startDispatcherOn, type InProcessDispatcher } from "../support/delivery-worker.js";

/**
 * `rate_limit` (docs/api.md, "Webhooks"): the most requests per second the service sends to a
 * webhook, over every trigger and across all dispatchers. Work held back waits its turn without
 * using an attempt, nothing is lost, and it is never sent in a burst when the limit lifts.
 */

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

const failFirst = new Set<string>();

describe("rate_limit", () => {
  let stack: Stack;
  let second: InProcessDispatcher;
  let hr: HookReceiver;

  beforeAll(async () => {
    stack = await startStack({ env: { DELIVERY_RETRY_DELAYS_MS: "300,300,300" } });
    // A second dispatcher on the same queue: the limit holds across both.
    second = startDispatcherOn(stack, { QUEUE_PREFIX: stack.prefix, DELIVERY_RETRY_DELAYS_MS: "300,300,300" });
    // The first request of each message in failFirst fails: its retry goes through the limit too.
    hr = await startHookReceiver(stack, (arrival) => {
      if (!arrival.messageId || !failFirst.has(arrival.messageId)) return {};
      failFirst.delete(arrival.messageId);
      return { status: 503 };
    });
  }, 60_000);
  afterAll(async () => {
    await second?.close();
    await stack?.close();
    await hr?.receiver.close().catch(() => undefined);
  });

  test("rate_limit 5: 30 events all arrive, never more than 5 in any second, with two dispatchers; retries wait their turn without using an attempt", async () => {
    const hook = await createHook(stack, hr, "/limited", ["message.sent"]);
    const patched = await stack.api("PATCH", `/v1/webhooks/${hook.id}`, { rate_limit: 5 });
    expect(patched.status).toBe(200);
    expect(patched.body.rate_limit).toBe(5);
    // Each claim reads the webhook's rate_limit as it is now: nothing to wait for after the PATCH.

    const events = Array.from({ length: 30 }, () => ({ event_type: "message.sent", data: sampleData("message.sent") }));
    for (const event of events.filter((_, i) => i % 3 === 0)) failFirst.add(event.data.messageId as string);
    const res = await stack.api("POST", "/v1/events/batch", { events });
    expect(res.status).toBe(201);
    const messageIds = new Set(events.map((e) => e.data.messageId as string));
    const ours = (all: Arrival[]) => emailArrivals(all, "/limited").filter((a) => messageIds.has(a.messageId!));
    const delivered = (all: Arrival[]) =>
      new Set(
        ours(all)
          .filter((a) => a.status === 200)
          .map((a) => a.messageId),
      ).size;
    await hr.receiver.waitFor((all) => delivered(all) === 30, 60_000);

    const arrivals = ours(hr.receiver.arrivals);
    expect(mostInAnyWindow(arrivals, 1_000)).toBeLessThanOrEqual(5);
    // 30 events plus their retries at 5 per second: at least (n - 5) / 5 s from the first to the last.
    const span = arrivals[arrivals.length - 1].receivedAt - arrivals[0].receivedAt;
    expect(span).toBeGreaterThanOrEqual(((arrivals.length - 5) / 5) * 1000);
    // With both dispatchers live: the limit is the deployment's, whichever of them claims or sends.
    const live = await stack.pool.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM dispatchers WHERE queue_prefix = $1 AND seen_until > now() AND slots > 0",
      [stack.prefix],
    );
    expect(live.rows[0].n).toBe(2);
    // Held back is not an attempt: every event's rows are its real attempts (one, or a failure and its retry).
    for (const id of (res.body.data as { event_id: string }[]).map((e) => e.event_id)) {
      const rows = await stack.api("GET", `/v1/deliveries?event_id=${id}`);
      const statuses = (rows.body.data as { response_status: number }[]).map((r) => r.response_status).sort();
      expect([[200], [200, 503]]).toContainEqual(statuses);
    }
    expect(failFirst.size).toBe(0);
  }, 120_000);

  test("PATCH rate_limit: null lifts it for the work that waits, without a burst beyond the limit before it lifted", async () => {
    const hook = await createHook(stack, hr, "/lifted", ["message.delivered"]);
    expect((await stack.api("PATCH", `/v1/webhooks/${hook.id}`, { rate_limit: 2 })).status).toBe(200);
    await new Promise((r) => setTimeout(r, 1_100));
    const events = Array.from({ length: 40 }, () => ({ event_type: "message.delivered", data: sampleData("message.delivered") }));
    expect((await stack.api("POST", "/v1/events/batch", { events })).status).toBe(201);
    const ours = (all: Arrival[]) => emailArrivals(all, "/lifted").filter((a) => a.status === 200);
    await hr.receiver.waitFor((all) => ours(all).length >= 4, 30_000);
    expect(mostInAnyWindow(ours(hr.receiver.arrivals), 1_000)).toBeLessThanOrEqual(2);

    const lifted = await stack.api("PATCH", `/v1/webhooks/${hook.id}`, { rate_limit: null });
    expect(lifted.body.rate_limit).toBeNull();
    const liftedAt = Date.now();
    // At 2 per second the rest would take some 18 s; lifted, it arrives within a few seconds.
    await hr.receiver.waitFor((all) => new Set(ours(all).map((a) => a.messageId)).size === 40, 15_000);
    expect(Date.now() - liftedAt).toBeLessThan(12_000);
  }, 120_000);
});

import { sampleData, startStack, waitUntil, type Stack } from "../support/stack.js";
import { createHook, deliveryRows, emailArrivals, expectError, startHookReceiver, type HookReceiver } from "../support/hooks.js";

/**
 * Pausing a webhook (docs/api.md, "Webhooks"): nothing is sent to its URL while it is paused,
 * nothing waiting for it is lost and no attempt is used up; a retry that fell due meanwhile is
 * sent on resume, with the work that waited, each once. A test send to a paused webhook is 409.
 */
describe("a paused webhook", () => {
  let stack: Stack;
  let hr: HookReceiver;
  /** messageIds whose first request the receiver answers 500. */
  const failFirst = new Set<string>();

  beforeAll(async () => {
    stack = await startStack({ env: { DELIVERY_RETRY_DELAYS_MS: "1000,1000,1000" } });
    hr = await startHookReceiver(stack, (arrival) => {
      if (arrival.messageId && failFirst.delete(arrival.messageId)) return { status: 500 };
      return {};
    });
  }, 60_000);
  afterAll(async () => {
    await stack?.close();
    await hr?.receiver.close().catch(() => undefined);
  });

  const eventStatus = async (eventId: string) => (await stack.api("GET", `/v1/events/${eventId}`)).body.status as string;

  test("gets nothing while paused, loses nothing, uses no attempt, and gets each event once on resume", async () => {
    const hook = await createHook(stack, hr, "/paused", ["message.sent"]);
    await hr.receiver.waitFor((all) => all.some((a) => a.path === "/paused"));

    // The first event fails once: its retry is due 1 s later.
    const first = sampleData("message.sent");
    failFirst.add(first.messageId as string);
    const firstEvent = await stack.api("POST", "/v1/events", { event_type: "message.sent", data: first });
    expect(firstEvent.status).toBe(201);
    await hr.receiver.waitFor((all) => emailArrivals(all, "/paused").length === 1);
    const paused = await stack.api("PATCH", `/v1/webhooks/${hook.id}`, { status: "paused" });
    expect(paused.status).toBe(200);
    expect(paused.body).toMatchObject({ status: "paused", disabled_reason: null });

    const later = [];
    for (let i = 0; i < 3; i++) {
      const res = await stack.api("POST", "/v1/events", { event_type: "message.sent", data: sampleData("message.sent") });
      expect(res.status).toBe(201);
      later.push(res.body.event_id as string);
    }
    // Longer than the whole retry schedule: nothing arrives, everything stays pending.
    await expect(hr.receiver.waitFor((all) => emailArrivals(all, "/paused").length > 1, 4_000)).rejects.toThrow(/condition not met/);
    for (const id of [firstEvent.body.event_id as string, ...later]) expect(await eventStatus(id)).toBe("pending");
    expectError(await stack.api("POST", `/v1/webhooks/${hook.id}/test`, {}), 409, "conflict");

    expect((await stack.api("PATCH", `/v1/webhooks/${hook.id}`, { status: "enabled" })).status).toBe(200);
    await hr.receiver.waitFor((all) => emailArrivals(all, "/paused").length === 5, 10_000);
    for (const id of [firstEvent.body.event_id as string, ...later])
      await waitUntil(
        () => eventStatus(id),
        (s) => s === "delivered",
      );
    const rows = await deliveryRows(stack, { event_id: firstEvent.body.event_id as string });
    expect(rows.map((r) => [r.trigger, r.attempt])).toEqual([
      ["initial", 0],
      ["retry", 1],
    ]);
    // Each of the three later events was sent once.
    const arrivals = emailArrivals(hr.receiver.arrivals, "/paused");
    expect(new Set(arrivals.map((a) => a.messageId)).size).toBe(4);
  }, 60_000);

  test("shows its waiting work on its page and in the API's webhook, and can be disabled from paused", async () => {
    const hook = await createHook(stack, hr, "/paused-2", ["message.delivered"]);
    await hr.receiver.waitFor((all) => all.some((a) => a.path === "/paused-2"));
    expect((await stack.api("PATCH", `/v1/webhooks/${hook.id}`, { status: "paused" })).status).toBe(200);
    const sent = await stack.api("POST", "/v1/events", { event_type: "message.delivered", data: sampleData("message.delivered") });
    expect(sent.status).toBe(201);
    expect((await stack.api("GET", `/v1/webhooks/${hook.id}`)).body.status).toBe("paused");
    // A replay waits for the resume too.
    expect((await stack.api("POST", `/v1/events/${sent.body.event_id}/replay`, {})).status).toBe(202);
    const disabled = await stack.api("PATCH", `/v1/webhooks/${hook.id}`, { status: "disabled" });
    expect(disabled.body).toMatchObject({ status: "disabled", disabled_reason: "manual" });
    // Disabling cancels what waited.
    await waitUntil(
      async () => (await stack.api("GET", `/v1/events/${sent.body.event_id}`)).body.status,
      (s) => s === "failed",
    );
    // ... and ends the waiting replay unsent: its audit entry says cancelled.
    const audit = await waitUntil(
      async () => (await stack.api("GET", `/v1/audit-log?event_id=${sent.body.event_id}`)).body.data,
      (entries: { error: string | null }[]) => entries.length === 1,
    );
    expect(audit[0]).toMatchObject({ response_status: null, error: "cancelled" });
    expect(emailArrivals(hr.receiver.arrivals, "/paused-2")).toEqual([]);
  }, 60_000);
});

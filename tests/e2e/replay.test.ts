import { verify } from "@mailhooks/verify";
import type { Arrival } from "@mailhooks/receiver";
import { backdateEvent } from "../support/backdate.js";
import { sampleData, startStack, waitUntil, type Stack } from "../support/stack.js";

/** docs/api.md, "Replay": replay to the original URL or an override, its delivery row and audit entry. */
describe("replay", () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack({ env: { DELIVERY_RETRY_DELAYS_MS: "100,100,100", DELIVERY_TIMEOUT_MS: "1000" } });
  });
  afterAll(() => stack.close());

  /** A receiver whose /down path fails until `up` is set, and a webhook on it for every kind. */
  async function failedEvent() {
    // A fresh account, so that its event has exactly this one destination.
    const account = await stack.newAccount();
    const secrets = new Map<string, string>();
    const state = { up: false };
    const receiver = await stack.startReceiver({
      secretFor: (p) => secrets.get(p) ?? (p === "/other-secret" ? "whsec_someone_else" : undefined),
      behavior: (a) => (a.path === "/down" && !state.up && a.event !== "webhook.test" ? { status: 500 } : { status: 200 }),
    });
    const hook = await account.api("POST", "/v1/webhooks", { url: receiver.url("/down"), events: ["message.sent"] });
    secrets.set("/down", hook.body.secret);
    secrets.set("/override", hook.body.secret);
    const ev = await account.api("POST", "/v1/events", { event_type: "message.sent", data: sampleData("message.sent") });
    await waitUntil(
      () => account.api("GET", `/v1/events/${ev.body.event_id}`),
      (r) => r.body.status === "failed",
    );
    return { receiver, hook: hook.body, eventId: ev.body.event_id as string, state, account };
  }

  const emailArrivals = (arrivals: Arrival[], path: string) => arrivals.filter((a) => a.path === path && a.event === "message.sent");

  test("to the original URL after a failure: same bytes, fresh signature, one row, one audit entry, destination delivered", async () => {
    const { receiver, hook, eventId, state, account } = await failedEvent();
    state.up = true;
    const replay = await account.api("POST", `/v1/events/${eventId}/replay`);
    expect(replay.status).toBe(202);
    expect(replay.body).toEqual({
      event_id: eventId,
      replays: [{ replay_id: expect.stringMatching(/^rpl_/), webhook_id: hook.id, destination_url: hook.url }],
    });

    const arrivals = await receiver.waitFor((a) => emailArrivals(a, "/down").length === 5);
    const [first, , , , replayed] = emailArrivals(arrivals, "/down");
    expect(replayed.body).toBe(first.body);
    expect(replayed.verified).toBe(true);
    expect(
      verify(hook.secret, { "x-service-timestamp": replayed.timestamp, "x-service-signature": replayed.signature }, replayed.body, {
        now: new Date(replayed.receivedAt),
      }),
    ).toEqual(JSON.parse(replayed.body));

    const audit = await waitUntil(
      () => account.api("GET", `/v1/audit-log?event_id=${eventId}`),
      (r) => r.body.data.length === 1,
    );
    expect(audit.body.data[0]).toEqual({
      id: expect.stringMatching(/^aud_/),
      event_id: eventId,
      replayed_at: expect.any(String),
      destination_url: hook.url,
      response_status: 200,
      error: null,
      api_key_id: account.apiKeyId,
    });
    const rows = await account.api("GET", `/v1/deliveries?event_id=${eventId}`);
    expect(rows.body.data.filter((d: any) => d.trigger === "replay")).toHaveLength(1);
    expect(rows.body.data).toHaveLength(5);
    const detail = await waitUntil(
      () => account.api("GET", `/v1/events/${eventId}`),
      (r) => r.body.status === "delivered",
    );
    expect(detail.body.destinations[0]).toMatchObject({ status: "delivered", attempts: 5 });
  });

  test("to an override URL: verifies with the original secret; a receiver with another secret answers 401, recorded in the audit entry", async () => {
    const { receiver, hook, eventId, account } = await failedEvent();
    const ok = await account.api("POST", `/v1/events/${eventId}/replay`, { target_url: receiver.url("/override") });
    expect(ok.status).toBe(202);
    expect(ok.body.replays[0].destination_url).toBe(receiver.url("/override"));
    const bad = await account.api("POST", `/v1/events/${eventId}/replay`, {
      target_url: receiver.url("/other-secret"),
      webhook_id: hook.id,
    });
    expect(bad.status).toBe(202);
    await receiver.waitFor((a) => a.some((x) => x.path === "/override") && a.some((x) => x.path === "/other-secret"));
    const audit = await waitUntil(
      () => account.api("GET", `/v1/audit-log?event_id=${eventId}`),
      (r) => r.body.data.length === 2,
    );
    const byUrl = Object.fromEntries(audit.body.data.map((e: any) => [e.destination_url, e.response_status]));
    expect(byUrl).toEqual({ [receiver.url("/override")]: 200, [receiver.url("/other-secret")]: 401 });
    // A replay to an override URL does not change the destination's own status.
    expect((await account.api("GET", `/v1/events/${eventId}`)).body.destinations[0].status).toBe("failed");
  });

  test("an event with several destinations: one replay each; target_url needs webhook_id", async () => {
    const receiver = await stack.startReceiver({ secretFor: () => undefined });
    const account = await stack.newAccount();
    const a = await account.api("POST", "/v1/webhooks", { url: receiver.url("/a"), events: ["message.opened"] });
    const b = await account.api("POST", "/v1/webhooks", { url: receiver.url("/b"), events: ["message.opened"] });
    const ev = await account.api("POST", "/v1/events", { event_type: "message.opened", data: sampleData("message.opened") });
    const all = await account.api("POST", `/v1/events/${ev.body.event_id}/replay`);
    expect(all.status).toBe(202);
    expect(all.body.replays.map((r: any) => r.webhook_id).sort()).toEqual([a.body.id, b.body.id].sort());
    const ambiguous = await account.api("POST", `/v1/events/${ev.body.event_id}/replay`, { target_url: receiver.url("/c") });
    expect(ambiguous.status).toBe(409);
    expect(ambiguous.body.error.code).toBe("conflict");
    const named = await account.api("POST", `/v1/events/${ev.body.event_id}/replay`, {
      target_url: receiver.url("/c"),
      webhook_id: b.body.id,
    });
    expect(named.status).toBe(202);
    const one = await account.api("POST", `/v1/events/${ev.body.event_id}/replay`, { webhook_id: a.body.id });
    expect(one.body.replays).toEqual([{ replay_id: expect.any(String), webhook_id: a.body.id, destination_url: receiver.url("/a") }]);
  });

  test("an event with no destination, an unknown id, another account's event, a foreign webhook_id, an http target", async () => {
    const account = await stack.newAccount();
    const lonely = await account.api("POST", "/v1/events", { event_type: "message.sent", data: sampleData("message.sent") });
    expect(lonely.body.status).toBe("delivered");
    const none = await account.api("POST", `/v1/events/${lonely.body.event_id}/replay`);
    expect([none.status, none.body.error.code]).toEqual([409, "conflict"]);
    const unknown = await account.api("POST", "/v1/events/evt_00000000000000000000000000000000/replay");
    expect([unknown.status, unknown.body.error.code]).toEqual([404, "not_found"]);
    const foreign = await stack.api("POST", `/v1/events/${lonely.body.event_id}/replay`);
    expect([foreign.status, foreign.body.error.code]).toEqual([404, "not_found"]);
    const { eventId, account: owner } = await failedEvent();
    const notDestination = await owner.api("POST", `/v1/events/${eventId}/replay`, { webhook_id: "wh_00000000000000000000000000000000" });
    expect([notDestination.status, notDestination.body.error.code]).toEqual([409, "conflict"]);
    const insecure = await owner.api("POST", `/v1/events/${eventId}/replay`, { target_url: "http://example.com/hook" });
    expect([insecure.status, insecure.body.error.code]).toEqual([422, "validation_error"]);
    expect(insecure.body.error.details[0].path).toBe("target_url");
  });

  test("a disabled or deleted webhook: no replay to its own URL (409), but its secret still signs a replay to a target_url", async () => {
    const { receiver, hook, eventId, account } = await failedEvent();
    expect((await account.api("PATCH", `/v1/webhooks/${hook.id}`, { status: "disabled" })).status).toBe(200);
    const own = await account.api("POST", `/v1/events/${eventId}/replay`);
    expect([own.status, own.body.error.code]).toEqual([409, "conflict"]);
    expect((await account.api("DELETE", `/v1/webhooks/${hook.id}`)).status).toBe(204);
    expect((await account.api("POST", `/v1/events/${eventId}/replay`)).status).toBe(409);
    const override = await account.api("POST", `/v1/events/${eventId}/replay`, { target_url: receiver.url("/override") });
    expect(override.status).toBe(202);
    expect(override.body.replays).toEqual([
      { replay_id: expect.stringMatching(/^rpl_/), webhook_id: hook.id, destination_url: receiver.url("/override") },
    ]);
    const replayed = (await receiver.waitFor((a) => a.some((x) => x.path === "/override"))).find((x) => x.path === "/override")!;
    expect(replayed.verified).toBe(true);
    expect(
      verify(hook.secret, { "x-service-timestamp": replayed.timestamp, "x-service-signature": replayed.signature }, replayed.body, {
        now: new Date(replayed.receivedAt),
      }),
    ).toEqual(JSON.parse(replayed.body));
    // The deliveries log keeps what the receiver answered (docs/api.md, "Deliveries log": response_body).
    const rows = await waitUntil(
      () => account.api("GET", `/v1/deliveries?event_id=${eventId}`),
      (r) => r.body.data.some((d: any) => d.trigger === "replay"),
    );
    const row = rows.body.data.find((d: any) => d.trigger === "replay");
    expect(row).toMatchObject({ url: receiver.url("/override"), response_status: 200, response_body: JSON.stringify({ received: true }) });
    expect(rows.body.data.find((d: any) => d.trigger === "initial").response_body).toBe(JSON.stringify({ received: true }));
  });

  test("a purged event answers 410 payload_expired and keeps its metadata", async () => {
    const { eventId, account } = await failedEvent();
    const { purgeExpiredPayloads } = await import("@mailhooks/delivery-state");
    // The event as if it had come 91 days ago: past the horizon the purge sets.
    await backdateEvent(stack.pool, eventId, new Date(Date.now() - 91 * 86_400_000));
    expect((await purgeExpiredPayloads(stack.pool, 90)).purgedBefore.getTime()).toBeGreaterThan(Date.now() - 91 * 86_400_000);
    const replay = await account.api("POST", `/v1/events/${eventId}/replay`);
    expect([replay.status, replay.body.error.code]).toEqual([410, "payload_expired"]);
    const detail = await account.api("GET", `/v1/events/${eventId}`);
    expect(detail.body).toMatchObject({ payload: null, payload_retained: false, status: "failed" });
    const listed = await account.api("GET", `/v1/events?status=failed`);
    expect(listed.body.data).toEqual([expect.objectContaining({ event_id: eventId, payload_retained: false })]);
    expect((await account.api("GET", `/v1/deliveries?event_id=${eventId}`)).body.data).toHaveLength(4);
  });

  test("audit entries cannot be changed or removed, even with SQL", async () => {
    await expect(stack.prisma.$executeRaw`UPDATE audit_entries SET response_status = 200`).rejects.toThrow(/append-only/);
    await expect(stack.prisma.$executeRaw`DELETE FROM audit_entries`).rejects.toThrow(/append-only/);
  });
});

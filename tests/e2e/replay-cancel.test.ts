import { verify } from "@mailhooks/verify";
import { sampleData, startStack, waitUntil, type Stack } from "../support/stack.js";
import { at, createHook, deliveryRows, emailArrivals, startHookReceiver } from "../support/hooks.js";

/**
 * docs/api.md, "Webhooks"; docs/api.md, "Replay": disabled and deleted webhooks get no new deliveries. A replay to a
 * webhook's own URL, accepted while the webhook was enabled, whose webhook is disabled or deleted
 * before the dispatcher gets to it, is not sent: it ends `cancelled`, with no delivery row (no
 * attempt was made) and an audit entry with `response_status` null and `error` "cancelled". A
 * replay to an override URL is sent all the same, signed with the disabled webhook's secret.
 */
const ENV = { DELIVERY_RETRY_DELAYS_MS: "100,100,100", DELIVERY_TIMEOUT_MS: "2000" };

describe("a replay whose webhook is disabled or deleted before the dispatcher runs it", () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack({ env: ENV });
  });
  afterAll(async () => {
    await stack?.close();
  });

  test("to the own URL: not sent, cancelled, no delivery row, audit entry 'cancelled'; to an override URL: sent, signed with the disabled webhook's secret", async () => {
    const acct = await stack.newAccount();
    const hr = await startHookReceiver(stack);
    const disabled = await createHook(acct, hr, "/disabled", ["message.sent"]);
    const deleted = await createHook(acct, hr, "/deleted", ["message.sent"]);
    hr.secrets.set("/override", disabled.secret);
    const posted = await acct.api("POST", "/v1/events", { event_type: "message.sent", data: sampleData("message.sent") });
    expect(posted.status).toBe(201);
    const eventId = posted.body.event_id as string;
    await waitUntil(
      () => acct.api("GET", `/v1/events/${eventId}`),
      (r) => r.body.status === "delivered",
    );
    await hr.receiver.waitFor((a) =>
      ["/disabled", "/deleted"].every((p) => emailArrivals(a, p).length === 1 && at(a, p, "webhook.test").length === 1),
    );

    // The dispatcher is not running: the replays are accepted (committed with their work_items rows)
    // while both webhooks are enabled, and wait.
    await stack.stopDispatcher();
    const own = await acct.api("POST", `/v1/events/${eventId}/replay`);
    expect(own.status).toBe(202);
    expect(own.body.replays.map((r: any) => r.destination_url).sort()).toEqual([disabled.url, deleted.url].sort());
    const override = await acct.api("POST", `/v1/events/${eventId}/replay`, { target_url: hr.url("/override"), webhook_id: disabled.id });
    expect(override.status).toBe(202);
    expect((await acct.api("PATCH", `/v1/webhooks/${disabled.id}`, { status: "disabled" })).status).toBe(200);
    expect((await acct.api("DELETE", `/v1/webhooks/${deleted.id}`)).status).toBe(204);
    const arrivedBefore = hr.receiver.arrivals.length;

    stack.startDispatcher();
    const replayIds = [...own.body.replays, ...override.body.replays].map((r: any) => r.replay_id as string);
    const replays = await waitUntil(
      () => stack.prisma.replay.findMany({ where: { id: { in: replayIds } }, select: { id: true, status: true, destinationUrl: true } }),
      (rows) => rows.length === 3 && rows.every((r) => r.status !== "pending"),
    );
    const statusOf = (url: string) => replays.find((r) => r.destinationUrl === url)?.status;
    expect([statusOf(disabled.url), statusOf(deleted.url), statusOf(hr.url("/override"))]).toEqual(["cancelled", "cancelled", "delivered"]);

    // Nothing reached the disabled or the deleted webhook; the override got its one request.
    const overrideArrival = (await hr.receiver.waitFor((a) => at(a, "/override").length === 1)).find((a) => a.path === "/override")!;
    expect(emailArrivals(hr.receiver.arrivals, "/disabled")).toHaveLength(1);
    expect(emailArrivals(hr.receiver.arrivals, "/deleted")).toHaveLength(1);
    expect(hr.receiver.arrivals.slice(arrivedBefore).map((a) => a.path)).toEqual(["/override"]);
    expect(overrideArrival.verified).toBe(true);
    expect(
      verify(
        disabled.secret,
        { "x-service-timestamp": overrideArrival.timestamp, "x-service-signature": overrideArrival.signature },
        overrideArrival.body,
        { now: new Date(overrideArrival.receivedAt) },
      ),
    ).toEqual(JSON.parse(overrideArrival.body));

    // The audit log shows every replay; the cancelled ones with no status and error "cancelled".
    const audit = await waitUntil(
      () => acct.api("GET", `/v1/audit-log?event_id=${eventId}`),
      (r) => r.status === 200 && r.body.data.length === 3,
    );
    const entry = (url: string) => audit.body.data.find((a: any) => a.destination_url === url);
    for (const url of [disabled.url, deleted.url]) {
      expect(entry(url)).toMatchObject({ event_id: eventId, response_status: null, error: "cancelled", api_key_id: acct.apiKeyId });
    }
    expect(entry(hr.url("/override"))).toMatchObject({ response_status: 200, error: null });
    // One delivery row for the one attempt made (to the override); none for the cancelled replays.
    const rows = await deliveryRows(acct, { event_id: eventId });
    expect(rows.filter((r) => r.trigger === "replay").map((r) => r.url)).toEqual([hr.url("/override")]);
    // The destinations keep what they were.
    const { rows: destinations } = await stack.pool.query("SELECT status::text AS status FROM destinations WHERE event_id = $1", [eventId]);
    expect(destinations.map((d) => d.status)).toEqual(["delivered", "delivered"]);
  });

  test("a replay asked for with a target_url is sent even when that URL is the disabled webhook's own", async () => {
    stack.startDispatcher();
    const acct = await stack.newAccount();
    const hr = await startHookReceiver(stack);
    const hook = await createHook(acct, hr, "/own", ["message.sent"]);
    const posted = await acct.api("POST", "/v1/events", { event_type: "message.sent", data: sampleData("message.sent") });
    const eventId = posted.body.event_id as string;
    await waitUntil(
      () => acct.api("GET", `/v1/events/${eventId}`),
      (r) => r.body.status === "delivered",
    );
    expect((await acct.api("PATCH", `/v1/webhooks/${hook.id}`, { status: "disabled" })).status).toBe(200);

    const replay = await acct.api("POST", `/v1/events/${eventId}/replay`, { target_url: hook.url, webhook_id: hook.id });
    expect(replay.status).toBe(202);
    await hr.receiver.waitFor((a) => emailArrivals(a, "/own").length === 2);
    const audit = await waitUntil(
      () => acct.api("GET", `/v1/audit-log?event_id=${eventId}`),
      (r) => r.status === 200 && r.body.data.length === 1,
    );
    expect(audit.body.data[0]).toMatchObject({ destination_url: hook.url, response_status: 200, error: null });
  });
});

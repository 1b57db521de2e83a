import { verify } from "@mailhooks/verify";
import { sampleData, startStack, waitUntil, type Stack } from "../support/stack.js";
import { apiAs, createHook, deliveryRows, eventOf, startHookReceiver } from "../support/hooks.js";
import { killAll, removeMaintenanceQueue, startDispatcher, waitForOutput } from "./support/processes.js";
import { startRedisServer, type RedisServer } from "@mailhooks/processes";

/**
 * CONTRACT.md section 5, "Accepted means delivered": with Redis down, every accept path answers
 * 201/202 (a webhook with its test event, an event, a raw message, a batch, a replay), because
 * acceptance is one PostgreSQL transaction with outbox rows; once Redis is back, the dispatcher's
 * relay (which kept retrying) queues the work, and each piece arrives once, signed.
 *
 * Redis is a throwaway redis-server of this test, stopped and started again; never the system one.
 */
describe("accepted while Redis is down, delivered once it is back", () => {
  let redisServer: RedisServer;
  let stack: Stack;

  beforeAll(async () => {
    redisServer = await startRedisServer({ appendOnly: true });
    stack = await startStack({ env: { REDIS_URL: redisServer.url }, dispatcher: false });
  });
  afterAll(async () => {
    await killAll();
    if (stack) await removeMaintenanceQueue(stack.prefix, redisServer.url).catch(() => undefined);
    await stack?.close();
    await redisServer?.destroy();
  });

  test("webhook + test event, event, raw message, batch and replay: 201/202 while down, each delivered once after", async () => {
    const dispatcher = startDispatcher("dispatcher", { REDIS_URL: redisServer.url, QUEUE_PREFIX: stack.prefix, LOG_LEVEL: "info" });
    await waitForOutput(dispatcher, "dispatcher started");
    await redisServer.stop();
    const ready = await apiAs(stack, null, "GET", "/readyz");
    expect([ready.status, ready.body.checks]).toEqual([200, { postgres: "ok", redis: "unavailable" }]);

    const hr = await startHookReceiver(stack);
    const hook = await createHook(stack, hr, "/down", ["message.sent", "message.received"]);
    expect(hook.body.secret).toMatch(/^whsec_/);
    const single = await stack.api("POST", "/v1/events", { event_type: "message.sent", data: sampleData("message.sent") });
    expect(single.status).toBe(201);
    const raw = "From: a@example.com\r\nTo: inbox@example.net\r\nSubject: hi\r\nMessage-ID: <down-1@example.com>\r\n\r\nbody\r\n";
    const inbound = await stack.api("POST", "/v1/inboxes/inbox@example.net/messages", raw, { "content-type": "message/rfc822" });
    expect(inbound.status).toBe(201);
    const batch = await stack.api("POST", "/v1/events/batch", {
      events: [
        { event_type: "message.sent", data: sampleData("message.sent") },
        { event_type: "message.sent", data: sampleData("message.sent") },
      ],
    });
    expect(batch.status).toBe(201);
    const replay = await stack.api("POST", `/v1/events/${single.body.event_id}/replay`);
    expect(replay.status).toBe(202);
    const eventIds = [single.body.event_id, inbound.body.event_id, ...batch.body.data.map((e: any) => e.event_id)];
    // Nothing can have been sent yet.
    expect(hr.receiver.arrivals).toHaveLength(0);

    await redisServer.start();
    const back = Date.now();
    // 1 test event + 4 events + 1 replay.
    // About 3 s after the restart in every run but two of about 25: once in CI and once locally
    // beside other tests, one of the six had not arrived after 30 s (nor, locally, by the test's
    // 60 s timeout; cause not found). Accepted means delivered, not delivered within 30 s: past 30 s
    // the test waits up to 120 s (the sweeper takes back lost work older than SWEEP_AFTER_MS) and
    // prints what was late, for whoever finds the cause.
    const arrivals = await hr.receiver
      .waitFor((a) => a.length >= 6, 30_000)
      .catch(async () => {
        const all = await hr.receiver.waitFor((a) => a.length >= 6, 90_000);
        const rows = await deliveryRows(stack, { webhook_id: hook.id });
        const outbox = await stack.pool.query("SELECT job_name, job_id, created_at FROM outbox WHERE queue_prefix = $1", [stack.prefix]);
        console.warn(
          `redis-down-accept: arrivals 30 s or more after the restart. Arrived (ms after the restart): ${all.map((a) => `${eventOf(a)} ${a.receivedAt - back}`).join(", ")}. ` +
            `Delivery rows: ${JSON.stringify(rows.map((r) => [r.trigger, r.attempt, r.response_status, r.error, r.created_at]))}. Outbox: ${JSON.stringify(outbox.rows)}`,
        );
        return all;
      });
    for (const id of eventIds)
      await waitUntil(
        () => stack.api("GET", `/v1/events/${id}`),
        (r) => r.body.status === "delivered",
        10_000,
      );
    // Bounded absence check: nothing arrives twice.
    await new Promise((r) => setTimeout(r, 1_500));
    expect(arrivals).toHaveLength(6);
    expect(arrivals.map(eventOf).sort()).toEqual([
      "message.received",
      "message.sent",
      "message.sent",
      "message.sent",
      "message.sent",
      "webhook.test",
    ]);
    for (const a of arrivals)
      expect(
        verify(hook.secret, { "x-service-timestamp": a.timestamp, "x-service-signature": a.signature }, a.body, {
          now: new Date(a.receivedAt),
        }),
      ).toEqual(JSON.parse(a.body));
    const rows = await deliveryRows(stack, { webhook_id: hook.id });
    expect(rows.map((r) => r.trigger).sort()).toEqual(["initial", "initial", "initial", "initial", "replay", "test"]);
    expect(dispatcher.running()).toBe(true);
  }, 180_000);
});

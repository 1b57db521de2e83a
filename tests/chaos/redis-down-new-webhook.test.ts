import { startRedisServer, type RedisServer } from "@mailhooks/processes";
import { sampleData, startStack, waitUntil, type Stack } from "../support/stack.js";
import { at, createHook, eventOf, startHookReceiver } from "../support/hooks.js";
import { killAll, removeMaintenanceQueue, startDispatcher, waitForOutput } from "./support/processes.js";

/**
 * docs/scheduler.md, the relay: after a push to Redis failed, each pass first checks that Redis
 * answers again, and the webhooks notified meanwhile stay notified until a claim takes them. A
 * webhook whose only way into the claim's round is its notification (new work for a webhook never
 * served: its test event, its first event) and that is notified while the dispatcher's Redis is
 * down is claimed once Redis is back, within seconds (the relay's pause after failures is 5 s at
 * most, ioredis reconnects every 2 s at most), not only at some later notification of it.
 *
 * Redis is a throwaway redis-server of this test, stopped and started again on its port; never
 * the system one.
 */
/** DISPATCHER_VISIBILITY_TIMEOUT_MS: the relay's heartbeat, at the start of a pass, comes every third of it. */
const VISIBILITY_MS = 3_000;
/** How soon after Redis is back the new webhook's work must arrive, in ms. */
const BACK_WITHIN_MS = 15_000;

describe("a webhook given its first work while the dispatcher's Redis is down", () => {
  let redisServer: RedisServer;
  let stack: Stack;

  beforeAll(async () => {
    redisServer = await startRedisServer();
    stack = await startStack({ env: { REDIS_URL: redisServer.url }, dispatcher: false });
  });
  afterAll(async () => {
    await killAll();
    if (stack) await removeMaintenanceQueue(stack.prefix, redisServer.url).catch(() => undefined);
    await stack?.close();
    await redisServer?.destroy();
  });

  test("is claimed and delivered once Redis is back, though the relay's passes failed while it was notified", async () => {
    const dispatcher = startDispatcher("dispatcher", {
      REDIS_URL: redisServer.url,
      QUEUE_PREFIX: stack.prefix,
      DISPATCHER_VISIBILITY_TIMEOUT_MS: String(VISIBILITY_MS),
      LOG_LEVEL: "info",
    });
    await waitForOutput(dispatcher, "dispatcher started");
    const hr = await startHookReceiver(stack);
    await createHook(stack, hr, "/a", ["message.sent"]);
    await hr.receiver.waitFor((all) => at(all, "/a", "webhook.test").length === 1, 15_000);

    // Redis goes down; webhook A gets an event: the relay claims it, its push fails, the lease is
    // given back, and from now on every pass pings Redis before claiming.
    await redisServer.stop();
    const forA = await stack.api("POST", "/v1/events", { event_type: "message.sent", data: sampleData("message.sent") });
    expect(forA.status).toBe(201);
    await waitForOutput(dispatcher, "relay pass failed", 15_000);

    // Webhook B, new, gets its first work (its test event, then an event) while Redis is still
    // down: only their notifications bring B into the round.
    const hookB = await createHook(stack, hr, "/b", ["message.received"]);
    const forB = await stack.api("POST", "/v1/events", { event_type: "message.received", data: sampleData("message.received") });
    expect(forB.status).toBe(201);
    const notifiedAt = (await stack.pool.query<{ t: Date }>("SELECT clock_timestamp() AS t")).rows[0].t;
    // A pass of the relay started after B's work was committed (its heartbeat, the first thing a
    // pass does, is newer), so with B notified and Redis still down: its ping failed.
    await waitUntil(
      async () =>
        (
          await stack.pool.query<{ after: boolean }>(
            "SELECT coalesce(bool_or(seen_until > $1::timestamptz + make_interval(secs => $2)), false) AS after FROM dispatchers WHERE queue_prefix = $3",
            [notifiedAt, VISIBILITY_MS / 1000, stack.prefix],
          )
        ).rows[0].after,
      Boolean,
      15_000,
      50,
    );
    expect(hr.receiver.arrivals.filter((a) => a.path === "/b")).toEqual([]);

    await redisServer.start();
    const relayLog = () =>
      dispatcher
        .output()
        .split("\n")
        .filter((line) => line.includes('"module":"relay"'))
        .join("\n");
    const arrivedB = await hr.receiver
      .waitFor((all) => at(all, "/b").length >= 2, BACK_WITHIN_MS)
      .catch(async (error: Error) => {
        const { rows } = await stack.pool.query(
          "SELECT kind, attempt, due_at, leased_until FROM work_items WHERE queue_prefix = $1 AND webhook_id = $2",
          [stack.prefix, hookB.id],
        );
        throw new Error(`${error.message}\nB's waiting work: ${JSON.stringify(rows)}\nthe relay's log:\n${relayLog()}`);
      });
    expect(at(arrivedB, "/b").map(eventOf).sort()).toEqual(["message.received", "webhook.test"]);
    // A's event, given back when its push failed, is delivered too.
    const arrivedA = await hr.receiver.waitFor((all) => at(all, "/a", "message.sent").length === 1, BACK_WITHIN_MS);
    expect(at(arrivedA, "/a").map(eventOf)).toEqual(["webhook.test", "message.sent"]);
    expect(dispatcher.running()).toBe(true);
  }, 90_000);
});

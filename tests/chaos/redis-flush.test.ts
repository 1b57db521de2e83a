import { Queue } from "bullmq";
import { createRedisConnection, JOB_NAMES, QUEUE_NAMES, type RedisClient } from "@mailhooks/queue";
import { verify } from "@mailhooks/verify";
import type { Arrival } from "@mailhooks/receiver";
import { CHECK_EVERY_MS } from "../../apps/dispatcher/src/maintenance.js";
import { sampleData, startStack, TIMED_OUT, waitUntil, type Stack } from "../support/stack.js";
import { createHook, deliveryRows, emailArrivals, startHookReceiver } from "../support/hooks.js";
import { killAll, startDispatcher } from "./support/processes.js";
import { startRedisServer, type RedisServer } from "@mailhooks/processes";

/**
 * Redis loses everything (FLUSHALL; the same as a Redis without persistence restarted) while a
 * dispatcher runs, with retries waiting for their delay, deliveries waiting for a slot, two
 * attempts in flight, and the maintenance job schedulers. Work waits in PostgreSQL until claimed
 * (docs/scheduler.md) and the attempts in flight keep their leases (their dispatcher renews them),
 * so the running dispatcher, never restarted, loses nothing: every acknowledged event arrives,
 * signed, once per attempt, at the right attempt numbers, the retries not before their delay; a
 * job claimed just before the flush would come back when its lease expires (a short visibility
 * timeout here). The dispatcher makes its maintenance schedulers again within CHECK_EVERY_MS.
 *
 * A throwaway redis-server on a port of its own is flushed, never the system one.
 */
const RETRY_MS = 4_000;
const SLOW_MS = 2_500;
const VISIBILITY_MS = 2_000;

describe("Redis flushed while a dispatcher runs", () => {
  let redisServer: RedisServer;
  let stack: Stack;
  let connection: RedisClient;
  let deliveries: Queue;
  let maintenance: Queue;

  beforeAll(async () => {
    redisServer = await startRedisServer({ appendOnly: true });
    stack = await startStack({ env: { REDIS_URL: redisServer.url }, dispatcher: false });
    connection = createRedisConnection(redisServer.url, "worker");
    connection.on("error", () => undefined);
    deliveries = new Queue(QUEUE_NAMES.deliveries, { connection, prefix: stack.prefix });
    maintenance = new Queue(QUEUE_NAMES.maintenance, { connection, prefix: stack.prefix });
  });
  afterAll(async () => {
    await killAll();
    await deliveries?.close();
    await maintenance?.close();
    connection?.disconnect();
    await stack?.close();
    await redisServer?.destroy();
  });

  test("retries, waiting work and the attempts in flight are all delivered, once per attempt, without a restart; the schedulers come back", async () => {
    const failedOnce = new Set<string>();
    let slowStarted = 0;
    let slowStarts = 0;
    // /retry fails each message's first request; /slow and /slow-reserve hold their answer SLOW_MS (the flush comes meanwhile).
    const hr = await startHookReceiver(stack, (a) => {
      if (a.event === "webhook.test") return {};
      if (a.path.startsWith("/slow")) {
        if (a.path === "/slow") slowStarted = Date.now();
        slowStarts++;
        return { delayMs: SLOW_MS };
      }
      if (a.messageId && !failedOnce.has(a.messageId)) {
        failedOnce.add(a.messageId);
        return { status: 500 };
      }
      return {};
    });
    const retryHook = await createHook(stack, hr, "/retry", ["message.sent"]);
    const slowHook = await createHook(stack, hr, "/slow", ["message.delivered"]);
    const reserveHook = await createHook(stack, hr, "/slow-reserve", ["message.opened"]);
    // One slot and the reserve of one (docs/scheduler.md): while /slow and /slow-reserve are in
    // flight, the deliveries after them wait in the work queue.
    const dispatcher = startDispatcher("dispatcher", {
      REDIS_URL: redisServer.url,
      QUEUE_PREFIX: stack.prefix,
      DISPATCHER_CONCURRENCY: "1",
      DELIVERY_RETRY_DELAYS_MS: [RETRY_MS, RETRY_MS, RETRY_MS].join(","),
      DISPATCHER_VISIBILITY_TIMEOUT_MS: String(VISIBILITY_MS),
    });
    await waitUntil(
      () => deliveries.getWorkersCount(),
      (n) => n >= 1,
      30_000,
    );
    await waitUntil(
      () => maintenance.getJobScheduler(JOB_NAMES.retention),
      (s) => !!s,
      10_000,
    );

    const post = async (eventType: string) => {
      const posted = await stack.api("POST", "/v1/events", { event_type: eventType, data: sampleData(eventType) });
      expect(posted.status).toBe(201);
      return posted.body.event_id as string;
    };
    const destinationOf = async (eventId: string) =>
      (await stack.prisma.destination.findFirstOrThrow({ where: { eventId }, select: { id: true } })).id;
    /** The work queue row of the destination of `eventId`: its attempt, and whether it waits (no lease). */
    const workOf = async (eventId: string) =>
      (
        await stack.pool.query<{ attempt: number; waiting: boolean }>(
          "SELECT attempt, leased_until IS NULL AS waiting FROM work_items WHERE work_id = $1",
          [await destinationOf(eventId)],
        )
      ).rows[0];

    // Two destinations mid-retry: their first attempt failed, their retry waits in the work queue.
    const midRetry = [await post("message.sent"), await post("message.sent")];
    await hr.receiver.waitFor((all) => emailArrivals(all, "/retry").length >= 2, 20_000);
    for (const eventId of midRetry)
      await waitUntil(
        () => workOf(eventId),
        (w) => w?.attempt === 1 && w.waiting,
        10_000,
        20,
      );

    // One attempt in flight at /slow, one at /slow-reserve (a newcomer takes the reserve), and two
    // deliveries waiting behind them.
    const inFlight = await post("message.delivered");
    await waitUntil(
      async () => slowStarted,
      (t) => t > 0,
      10_000,
      10,
    );
    const inReserve = await post("message.opened");
    await waitUntil(
      async () => slowStarts,
      (n) => n >= 2,
      10_000,
      10,
    );
    const waiting = [await post("message.sent"), await post("message.sent")];
    // Waiting for a slot: in the work queue, not leased (the two slots are in flight).
    for (const eventId of waiting) expect(await workOf(eventId)).toEqual({ attempt: 0, waiting: true });

    // Redis loses everything, the schedulers included.
    const failures = new Map(emailArrivals(hr.receiver.arrivals, "/retry").map((a) => [a.messageId, a.receivedAt]));
    await connection.flushall();
    const flushedAt = Date.now();
    expect(await deliveries.getJobCounts("delayed", "wait", "prioritized", "active")).toEqual({
      delayed: 0,
      wait: 0,
      prioritized: 0,
      active: 0,
    });
    expect(await maintenance.getJobScheduler(JOB_NAMES.retention)).toBeUndefined();
    // The flush came while /slow was still unanswered.
    expect(flushedAt - slowStarted).toBeLessThan(SLOW_MS);

    // Every event of /retry arrives twice (the failure, then its retry), /slow once.
    const ofRetry = (all: Arrival[]) => emailArrivals(all, "/retry");
    await hr.receiver.waitFor(
      (all) => ofRetry(all).length >= 2 * (midRetry.length + waiting.length) && emailArrivals(all, "/slow").length >= 1,
      RETRY_MS + 30_000,
    );

    for (const eventId of [...midRetry, ...waiting, inFlight, inReserve]) {
      const detail = await waitUntil(
        () => stack.api("GET", `/v1/events/${eventId}`),
        (r) => r.body.status !== "pending",
        20_000,
      );
      expect(detail.body.status).toBe("delivered");
      const slow = eventId === inFlight || eventId === inReserve;
      const hook = eventId === inFlight ? slowHook : eventId === inReserve ? reserveHook : retryHook;
      const attempts = slow ? 1 : 2;
      expect(detail.body.destinations).toEqual([{ webhook_id: hook.id, url: hook.url, status: "delivered", attempts }]);
      const rows = await deliveryRows(stack, { event_id: eventId });
      expect(rows.map((r) => [r.trigger, r.attempt, r.response_status, r.error])).toEqual(
        slow
          ? [["initial", 0, 200, null]]
          : [
              ["initial", 0, 500, null],
              ["retry", 1, 200, null],
            ],
      );
      const arrivals = emailArrivals(
        hr.receiver.arrivals,
        eventId === inFlight ? "/slow" : eventId === inReserve ? "/slow-reserve" : "/retry",
      ).filter((a) => a.messageId === detail.body.payload.data.messageId);
      // Once per attempt: the attempts in flight kept their leases through the flush.
      expect(arrivals).toHaveLength(attempts);
      for (const arrival of arrivals) {
        expect(
          verify(hook.secret, { "x-service-timestamp": arrival.timestamp, "x-service-signature": arrival.signature }, arrival.body, {
            now: new Date(arrival.receivedAt),
          }),
        ).toEqual(JSON.parse(arrival.body));
        expect(arrival.body).toBe(JSON.stringify(detail.body.payload));
      }
    }
    // The retries lost in the flush kept their due time: not before their delay after the failure.
    for (const eventId of midRetry) {
      const messageId = (await stack.api("GET", `/v1/events/${eventId}`)).body.payload.data.messageId as string;
      const [, retry] = ofRetry(hr.receiver.arrivals).filter((a) => a.messageId === messageId);
      expect(retry.receivedAt - failures.get(messageId)!).toBeGreaterThanOrEqual(RETRY_MS - 50);
    }
    // Nothing more comes: no work is left to claim. It was the same dispatcher all along.
    expect((await stack.pool.query("SELECT count(*)::int AS n FROM work_items WHERE queue_prefix = $1", [stack.prefix])).rows[0].n).toBe(0);
    await expect(
      hr.receiver.waitFor(
        (all) => emailArrivals(all, "/retry").length + emailArrivals(all, "/slow").length + emailArrivals(all, "/slow-reserve").length > 10,
        VISIBILITY_MS + 1_000,
      ),
    ).rejects.toThrow(TIMED_OUT);
    expect(dispatcher.running()).toBe(true);

    // The maintenance schedulers are back, made again by the running dispatcher's periodic check.
    await waitUntil(
      () => maintenance.getJobScheduler(JOB_NAMES.retention),
      (scheduler) => !!scheduler,
      CHECK_EVERY_MS + 15_000,
      500,
    );
    expect(await maintenance.getJobScheduler(JOB_NAMES.idempotencyPurge)).toBeDefined();
    expect(dispatcher.running()).toBe(true);
  }, 180_000);
});

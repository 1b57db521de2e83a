import { Queue } from "bullmq";
import { createRedisConnection, JOB_NAMES, QUEUE_NAMES, type RedisClient } from "@mailhooks/queue";
import { verify } from "@mailhooks/verify";
import type { Arrival } from "@mailhooks/receiver";
import { sampleData, startStack, TIMED_OUT, waitUntil, type Stack, queued } from "../support/stack.js";
import { createHook, deliveryRows, emailArrivals, startHookReceiver } from "../support/hooks.js";
import { killAll, startDispatcher } from "./support/processes.js";
import { startRedisServer, type RedisServer } from "@mailhooks/processes";

/**
 * Redis loses everything (FLUSHALL; the same as a Redis without persistence restarted) while a
 * dispatcher runs: delayed retries, waiting jobs, the job in flight, and the maintenance job
 * schedulers themselves. The running dispatcher, never restarted, makes its schedulers again and
 * its sweeper queues the lost work again: every acknowledged event arrives, signed, once per
 * attempt, at the right attempt numbers, the lost retries not before their delay.
 *
 * A throwaway redis-server on a port of its own is flushed, never the system one.
 */
const RETRY_MS = 4_000;
const SLOW_MS = 2_500;
const SWEEP = { SWEEP_INTERVAL_MS: "1000", SWEEP_AFTER_MS: "1000" };

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

  test("retries, waiting jobs and the job in flight are all delivered without a restart", async () => {
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
    // One slot and the scheduler's reserve of one (docs/scheduler.md): while /slow and /slow-reserve
    // are in flight, the deliveries after them wait in the queue.
    const dispatcher = startDispatcher("dispatcher", {
      REDIS_URL: redisServer.url,
      QUEUE_PREFIX: stack.prefix,
      DISPATCHER_CONCURRENCY: "1",
      DELIVERY_RETRY_DELAYS_MS: [RETRY_MS, RETRY_MS, RETRY_MS].join(","),
      ...SWEEP,
    });
    await waitUntil(
      () => deliveries.getWorkersCount(),
      (n) => n >= 1,
      30_000,
    );
    await waitUntil(
      () => maintenance.getJobScheduler(JOB_NAMES.sweep),
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

    // Two destinations mid-retry: their first attempt failed, their retry is a delayed job.
    const midRetry = [await post("message.sent"), await post("message.sent")];
    await hr.receiver.waitFor((all) => emailArrivals(all, "/retry").length >= 2, 20_000);
    for (const eventId of midRetry)
      await waitUntil(
        async () => deliveries.getJobState(await destinationOf(eventId)),
        (s) => s === "delayed",
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
    // Waiting: in the wait list, or in the prioritized set (the scheduler gives a webhook's later
    // jobs a priority), or held in the delayed set (a worker slot that only fetches took it and the
    // scheduler refused it a slot, docs/scheduler.md).
    for (const eventId of waiting)
      await waitUntil(
        async () => deliveries.getJobState(await destinationOf(eventId)),
        (s) => queued(s) || s === "delayed",
        10_000,
        20,
      );

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
    expect(await maintenance.getJobScheduler(JOB_NAMES.sweep)).toBeUndefined();
    // The flush came while /slow was still unanswered.
    expect(flushedAt - slowStarted).toBeLessThan(SLOW_MS);

    // Every event of /retry arrives twice (the failure, then its retry), /slow once.
    const ofRetry = (all: Arrival[]) => emailArrivals(all, "/retry");
    await hr.receiver.waitFor(
      (all) => ofRetry(all).length >= 2 * (midRetry.length + waiting.length) && emailArrivals(all, "/slow").length >= 1,
      RETRY_MS + 30_000,
    );
    // The schedulers are back (made again by the running dispatcher).
    expect(await maintenance.getJobScheduler(JOB_NAMES.sweep)).toBeDefined();

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
      // /slow-reserve's attempt was in flight when the flush lost its job, and /slow's end freed a
      // slot before it answered: the sweeper's new job may send it again meanwhile (at least once,
      // the same X-Service-Event-Id; one row). /slow answered before any slot freed: once.
      if (eventId === inReserve) expect(new Set(arrivals.map((a) => a.eventId))).toEqual(new Set([eventId]));
      else expect(arrivals).toHaveLength(attempts);
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
    // Nothing more comes, and it was the same dispatcher all along.
    await expect(
      hr.receiver.waitFor(
        (all) => emailArrivals(all, "/retry").length + emailArrivals(all, "/slow").length > 9,
        2 * Number(SWEEP.SWEEP_INTERVAL_MS) + 1_000,
      ),
    ).rejects.toThrow(TIMED_OUT);
    expect(dispatcher.running()).toBe(true);
  }, 120_000);
});

import { Queue } from "bullmq";
import { acceptEvents, attemptBudgetOf } from "@mailhooks/delivery-state";
import { createRedisConnection, DeliveryQueue, QUEUE_NAMES, type RedisClient } from "@mailhooks/queue";
import { verify } from "@mailhooks/verify";
import { sweepLostWork } from "../../apps/dispatcher/src/jobs/sweep-lost-work.js";
import { sampleData, startStack, TIMED_OUT, waitUntil, type Stack, queued } from "../support/stack.js";
import { createHook, deliveryRows, emailArrivals, eventOf, startHookReceiver } from "../support/hooks.js";
import { testRedisUrl } from "../support/env.js";
import { endChaosFile, startDispatcher } from "./support/processes.js";

/**
 * Issue "Accepted means delivered", items 1 and 8: work whose job Redis lost after acceptance
 * (a flush, a failover, an eviction) is found by the dispatchers' sweeper and delivered once,
 * at the right attempt number: a test delivery, a destination, a replay, and a destination lost
 * in the middle of its retries. The sweeper walks its own deployment's rows only (QUEUE_PREFIX),
 * and in keyset batches that a backlog of live jobs cannot starve.
 */
const SWEEP = { SWEEP_INTERVAL_MS: "1000", SWEEP_AFTER_MS: "1000" };
const RETRY_MS = 3_000;

describe("work whose job Redis lost", () => {
  let stack: Stack;
  let redis: RedisClient;
  let deliveries: Queue;

  beforeAll(async () => {
    // Accepted work reaches Redis through the in-process relay; no worker takes it.
    stack = await startStack({ dispatcher: "relay-only", env: { DELIVERY_RETRY_DELAYS_MS: `${RETRY_MS},${RETRY_MS},${RETRY_MS}` } });
    redis = createRedisConnection(testRedisUrl(), "worker");
    deliveries = new Queue(QUEUE_NAMES.deliveries, { connection: redis, prefix: stack.prefix });
  });
  afterAll(() =>
    endChaosFile(
      stack,
      () => deliveries?.close(),
      () => redis?.quit().catch(() => undefined),
    ),
  );

  test("a test delivery, a destination and a replay lost with their jobs are each delivered once", async () => {
    const hr = await startHookReceiver(stack);
    const hook = await createHook(stack, hr, "/lost", ["message.sent"]);
    const posted = await stack.api("POST", "/v1/events", { event_type: "message.sent", data: sampleData("message.sent") });
    expect(posted.status).toBe(201);
    const eventId = posted.body.event_id as string;
    const replay = await stack.api("POST", `/v1/events/${eventId}/replay`);
    expect(replay.status).toBe(202);

    // The three jobs reached Redis; then Redis loses them all.
    // Queued jobs wait in BullMQ's wait list or, with a scheduler priority, its prioritized set.
    await waitUntil(
      () => deliveries.getJobCounts("wait", "prioritized"),
      (c) => c.wait + c.prioritized === 3,
    );
    await deliveries.obliterate({ force: true });
    expect(await deliveries.getJobCounts("wait", "prioritized")).toEqual({ wait: 0, prioritized: 0 });

    const dispatcher = startDispatcher("dispatcher", {
      QUEUE_PREFIX: stack.prefix,
      DELIVERY_RETRY_DELAYS_MS: `${RETRY_MS},${RETRY_MS},${RETRY_MS}`,
      ...SWEEP,
    });
    const detail = await waitUntil(
      () => stack.api("GET", `/v1/events/${eventId}`),
      (r) => r.body.status === "delivered",
      20_000,
    );
    await waitUntil(
      () => deliveryRows(stack, { webhook_id: hook.id }),
      (rows) => rows.length === 3,
      20_000,
    );
    const arrivals = hr.receiver.arrivals.filter((a) => a.path === "/lost");
    expect(arrivals.map((a) => eventOf(a)).sort()).toEqual(["message.sent", "message.sent", "webhook.test"]);
    for (const arrival of arrivals)
      expect(
        verify(hook.secret, { "x-service-timestamp": arrival.timestamp, "x-service-signature": arrival.signature }, arrival.body, {
          now: new Date(arrival.receivedAt),
        }),
      ).toEqual(JSON.parse(arrival.body));
    expect(emailArrivals(arrivals, "/lost").every((a) => a.body === JSON.stringify(detail.body.payload))).toBe(true);
    const rows = await deliveryRows(stack, { webhook_id: hook.id });
    expect(rows.map((r) => [r.trigger, r.attempt, r.response_status]).sort()).toEqual([
      ["initial", 0, 200],
      ["replay", 0, 200],
      ["test", 0, 200],
    ]);
    expect((await stack.api("GET", `/v1/audit-log?event_id=${eventId}`)).body.data).toHaveLength(1);
    // Nothing more comes: every unit of work ended, so later sweeps find nothing.
    await expect(hr.receiver.waitFor((all) => all.filter((a) => a.path === "/lost").length > 3, 3_000)).rejects.toThrow(TIMED_OUT);
    expect(dispatcher.running()).toBe(true);
  });

  test("a destination whose retry job is lost resumes at retry 1, due its delay after the failure", async () => {
    const hr = await startHookReceiver(stack, (a, nth) => (nth === 1 ? { status: 500 } : {}));
    const hook = await createHook(stack, hr, "/mid-retry", ["message.delivered"]);
    const posted = await stack.api("POST", "/v1/events", { event_type: "message.delivered", data: sampleData("message.delivered") });
    const eventId = posted.body.event_id as string;
    const [{ id: destinationId }] = await stack.prisma.destination.findMany({ where: { eventId }, select: { id: true } });
    const [failure] = emailArrivals(await hr.receiver.waitFor((a) => emailArrivals(a, "/mid-retry").length === 1, 20_000), "/mid-retry");
    expect(failure.status).toBe(500);
    // Its retry is a delayed job; Redis loses it.
    await waitUntil(
      () => deliveries.getJobState(destinationId),
      (s) => s === "delayed",
      5_000,
      20,
    );
    await deliveries.remove(destinationId);
    expect(await deliveries.getJobState(destinationId)).toBe("unknown");

    const arrivals = emailArrivals(
      await hr.receiver.waitFor((a) => emailArrivals(a, "/mid-retry").length === 2, RETRY_MS + 15_000),
      "/mid-retry",
    );
    // Not early: the retry kept its due time (the sweeper's job is delayed until then).
    expect(arrivals[1].receivedAt - failure.receivedAt).toBeGreaterThanOrEqual(RETRY_MS - 50);
    const detail = await waitUntil(
      () => stack.api("GET", `/v1/events/${eventId}`),
      (r) => r.body.status !== "pending",
      10_000,
    );
    expect(detail.body.destinations).toEqual([{ webhook_id: hook.id, url: hook.url, status: "delivered", attempts: 2 }]);
    expect((await deliveryRows(stack, { event_id: eventId })).map((r) => [r.trigger, r.attempt, r.response_status])).toEqual([
      ["initial", 0, 500],
      ["retry", 1, 200],
    ]);
  });

  test("another deployment's pending work (another QUEUE_PREFIX, same database) is left alone", async () => {
    const other = await startStack({ dispatcher: false });
    try {
      const hr = await startHookReceiver(other);
      await createHook(other, hr, "/theirs", ["message.sent"]);
      const posted = await other.api("POST", "/v1/events", { event_type: "message.sent", data: sampleData("message.sent") });
      const [{ id: destinationId }] = await other.prisma.destination.findMany({
        where: { eventId: posted.body.event_id },
        select: { id: true },
      });
      // Its outbox rows are lost too: a pending destination with no job anywhere.
      await other.pool.query("DELETE FROM outbox WHERE queue_prefix = $1", [other.prefix]);
      // This deployment's dispatcher (started by the first test) sweeps every second: several sweeps pass.
      await new Promise((r) => setTimeout(r, 4_000)); // bounded absence check
      expect((await other.pool.query("SELECT count(*)::int AS n FROM outbox WHERE job_id = $1", [destinationId])).rows[0].n).toBe(0);
      expect(await deliveries.getJobState(destinationId)).toBe("unknown");
      expect((await other.prisma.destination.findUnique({ where: { id: destinationId } }))?.status).toBe("pending");
      expect(hr.receiver.arrivals).toHaveLength(0);
    } finally {
      await other.close();
    }
  });
});

describe("the sweeper walks in keyset batches: a backlog of live jobs cannot hide a lost one", () => {
  let stack: Stack;
  let redis: RedisClient;
  let queue: DeliveryQueue;
  beforeAll(async () => {
    stack = await startStack({ dispatcher: "relay-only" });
    redis = createRedisConnection(testRedisUrl(), "worker");
    queue = new DeliveryQueue(redis, stack.prefix, attemptBudgetOf([1000, 1000, 1000]));
  });
  afterAll(async () => {
    await queue?.close();
    await redis?.quit().catch(() => undefined);
    await stack?.close();
  });

  test("with 12 live jobs ahead of it and batches of 5, the lost destination is found on the third run", async () => {
    const hr = await startHookReceiver(stack);
    await createHook(stack, hr, "/backlog", ["message.sent"]);
    const events = Array.from({ length: 13 }, () => ({
      eventType: "message.sent" as const,
      data: sampleData("message.sent") as any,
      occurredAt: new Date(),
    }));
    // One request, so the 13 destinations' ids sort in this order (UUIDv7).
    await acceptEvents(stack.pool, stack.accountId, stack.prefix, events);
    const ids = (await stack.pool.query("SELECT id FROM destinations WHERE queue_prefix = $1 ORDER BY id", [stack.prefix])).rows.map(
      (r) => r.id as string,
    );
    expect(ids).toHaveLength(13);
    await waitUntil(
      () => queue.queue.getJobCounts("wait", "prioritized"),
      (c) => c.wait + c.prioritized === 14,
    ); // 13 + the test delivery
    const lost = ids[12];
    await queue.queue.remove(lost);
    // Old enough for the sweeper (afterMs 0 here, as if SWEEP_AFTER_MS had passed).
    const sweep = () =>
      sweepLostWork({
        pool: stack.pool,
        redis,
        queue,
        queuePrefix: stack.prefix,
        retryDelaysMs: [1000, 1000, 1000],
        afterMs: 0,
        batchSize: 5,
      });
    const outboxHas = async () => (await stack.pool.query("SELECT count(*)::int AS n FROM outbox WHERE job_id = $1", [lost])).rows[0].n > 0;
    expect(await sweep()).toBe(0); // ids 0..4, all alive (and the test delivery, alive)
    expect(await sweep()).toBe(0); // ids 5..9
    const third = await sweep(); // ids 10..12: the lost one
    expect(third === 1 || (await queue.queue.getJobState(lost)) !== "unknown" || (await outboxHas())).toBe(true);
    // The relay queues it again under its own id.
    await waitUntil(
      () => queue.queue.getJobState(lost),
      (s) => queued(s),
      5_000,
    );
    // The cursor wrapped: the next run starts over from the first row.
    expect(await sweep()).toBe(0);
  });
});

import { Queue } from "bullmq";
import { createRedisConnection, QUEUE_NAMES, type RedisClient } from "@mailhooks/queue";
import { sampleData, startStack, waitUntil, type Stack } from "../support/stack.js";
import { apiAs, createHook, deliveryRows, emailArrivals, startHookReceiver } from "../support/hooks.js";
import { killAll, startDispatcher } from "./support/processes.js";
import { startRedisServer, type RedisServer } from "@mailhooks/processes";

/**
 * Issue 4, item 8 (Redis): Redis restarted while a retry is scheduled. The retry waits in
 * PostgreSQL (its work_items row, due its delay after the failure: docs/scheduler.md), not in
 * Redis, so it fires on time even though the restarted Redis kept nothing (no persistence here);
 * the dispatcher's connections come back by themselves; meanwhile the API kept accepting events
 * (201, delivered once Redis is back) and /readyz stayed 200, naming Redis.
 *
 * A throwaway redis-server on a port of its own is restarted, never the system one.
 */
const RETRY_MS = 3_000;
/** How late a retry may fire: queue promotion, a database read, a TLS handshake. */
const LATE_MS = 1_000;

describe("Redis restarted while a retry is scheduled", () => {
  let redisServer: RedisServer;
  let stack: Stack;
  let connection: RedisClient;
  let deliveries: Queue;

  beforeAll(async () => {
    redisServer = await startRedisServer();
    stack = await startStack({
      env: { REDIS_URL: redisServer.url, DELIVERY_RETRY_DELAYS_MS: [RETRY_MS, RETRY_MS, RETRY_MS].join(",") },
      dispatcher: false,
    });
    connection = createRedisConnection(redisServer.url, "worker");
    connection.on("error", () => undefined);
    deliveries = new Queue(QUEUE_NAMES.deliveries, { connection, prefix: stack.prefix });
    deliveries.on("error", () => undefined);
  });
  afterAll(async () => {
    await killAll();
    await deliveries?.close();
    connection?.disconnect();
    await stack?.close();
    await redisServer?.destroy();
  });

  test("the retry fires on schedule after the restart, the worker resumes, and the event is delivered", async () => {
    const hr = await startHookReceiver(stack, (a, nth) => (a.event === "webhook.test" ? {} : { status: nth === 1 ? 500 : 200 }));
    const hook = await createHook(stack, hr, "/restart", ["message.sent"]);
    startDispatcher("dispatcher", {
      REDIS_URL: redisServer.url,
      QUEUE_PREFIX: stack.prefix,
      DELIVERY_RETRY_DELAYS_MS: [RETRY_MS, RETRY_MS, RETRY_MS].join(","),
    });

    const data = sampleData("message.sent");
    const posted = await stack.api("POST", "/v1/events", { event_type: "message.sent", data });
    expect(posted.status).toBe(201);
    const eventId = posted.body.event_id as string;
    const [{ id: destinationId }] = await stack.prisma.destination.findMany({ where: { eventId }, select: { id: true } });

    const [failure] = emailArrivals(await hr.receiver.waitFor((a) => emailArrivals(a, "/restart").length >= 1, 30_000), "/restart");
    expect(failure.status).toBe(500);
    // The failure is recorded and its retry scheduled: the work waits in PostgreSQL for retry 1,
    // due its delay after the failure, and Redis holds nothing of it.
    const retryOf = async () =>
      (
        await stack.pool.query<{ attempt: number; leased: boolean; due_ms: number }>(
          "SELECT attempt, leased_until IS NOT NULL AS leased, (extract(epoch FROM due_at) * 1000)::float8 AS due_ms FROM work_items WHERE work_id = $1",
          [destinationId],
        )
      ).rows[0];
    const scheduled = await waitUntil(retryOf, (w) => w?.attempt === 1 && !w.leased, 5_000, 20);
    expect(scheduled.due_ms).toBeGreaterThanOrEqual(failure.receivedAt + RETRY_MS - 1_000);
    const jobsOfIt = async () =>
      (await deliveries.getJobs(["wait", "prioritized", "delayed", "active"])).filter((j) => j.data?.workId === destinationId);
    expect(await jobsOfIt()).toEqual([]);

    // Restart Redis well before the retry is due. While it is down, /readyz stays 200 (accepting
    // needs PostgreSQL only) and names Redis, and an event is accepted: 201.
    await redisServer.stop();
    const down = await apiAs(stack, null, "GET", "/readyz");
    expect(down.status).toBe(200);
    expect(down.body.checks).toEqual({ postgres: "ok", redis: "unavailable" });
    const whileDown = await stack.api("POST", "/v1/events", { event_type: "message.sent", data: sampleData("message.sent") });
    expect(whileDown.status).toBe(201);
    await redisServer.start();
    const restartedAt = Date.now();
    // (The test proves nothing unless Redis was back before the retry was due.)
    expect(restartedAt).toBeLessThan(failure.receivedAt + RETRY_MS - 500);

    // The restarted Redis is empty; the scheduled retry is where it was...
    await waitUntil(
      () => deliveries.getJobCounts("wait").catch(() => null),
      (counts) => counts !== null,
      5_000,
    );
    expect(await retryOf()).toEqual(scheduled);
    // ...and fires on time.
    const ofFirst = (all: typeof hr.receiver.arrivals) => emailArrivals(all, "/restart").filter((a) => a.messageId === data.messageId);
    const arrivals = ofFirst(await hr.receiver.waitFor((a) => ofFirst(a).length >= 2, RETRY_MS + 10_000));
    const lateness = arrivals[1].receivedAt - (failure.receivedAt + RETRY_MS);
    expect(lateness).toBeGreaterThanOrEqual(0);
    expect(lateness).toBeLessThan(LATE_MS);

    const detail = await waitUntil(
      () => stack.api("GET", `/v1/events/${eventId}`),
      (r) => r.status === 200 && r.body.status !== "pending",
    );
    expect(detail.body.status).toBe("delivered");
    expect(detail.body.destinations).toEqual([{ webhook_id: hook.id, url: hook.url, status: "delivered", attempts: 2 }]);
    const rows = await deliveryRows(stack, { event_id: eventId });
    expect(rows.map((r) => [r.attempt, r.trigger, r.response_status, r.error])).toEqual([
      [0, "initial", 500, null],
      [1, "retry", 200, null],
    ]);

    // The event accepted while Redis was down is delivered once it is back.
    const downDetail = await waitUntil(
      () => stack.api("GET", `/v1/events/${whileDown.body.event_id}`),
      (r) => r.body.status !== "pending",
      10_000,
    );
    expect(downDetail.body.status).toBe("delivered");

    // The API and the worker are back for new work: an event posted now is delivered at once.
    await waitUntil(
      () => apiAs(stack, null, "GET", "/readyz"),
      (r) => r.body.checks?.redis === "ok",
      5_000,
    );
    const next = await stack.api("POST", "/v1/events", { event_type: "message.sent", data: sampleData("message.sent") });
    expect(next.status).toBe(201);
    const postedAt = Date.now();
    const nextDetail = await waitUntil(
      () => stack.api("GET", `/v1/events/${next.body.event_id}`),
      (r) => r.status === 200 && r.body.status !== "pending",
      10_000,
    );
    expect(nextDetail.body.status).toBe("delivered");
    expect(Date.now() - postedAt).toBeLessThan(2_000);
    expect(emailArrivals(hr.receiver.arrivals, "/restart")).toHaveLength(4);
  });
});

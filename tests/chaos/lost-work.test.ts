import { Queue } from "bullmq";
import { createRedisConnection, QUEUE_NAMES, type RedisClient } from "@mailhooks/queue";
import { verify } from "@mailhooks/verify";
import { sampleData, startStack, TIMED_OUT, waitUntil, type Stack } from "../support/stack.js";
import { createHook, deliveryRows, emailArrivals, eventOf, startHookReceiver } from "../support/hooks.js";
import { testRedisUrl } from "../support/env.js";
import { claimIntoQueue } from "./support/claimed-jobs.js";
import { endChaosFile, startDispatcher, waitForExit, type ServiceProcess } from "./support/processes.js";

/**
 * Issue "Accepted means delivered", items 1 and 8, on the delivery core (docs/scheduler.md): work
 * whose job Redis lost after it was claimed (a flush, a failover, an eviction) keeps its work_items
 * row and its lease; once the lease expires (DISPATCHER_VISIBILITY_TIMEOUT_MS, short here by
 * configuration) a dispatcher claims it again and delivers it once, at the right attempt number: a
 * test delivery, a destination, a replay, and a destination claimed for its retry. Work between two
 * attempts waits in PostgreSQL, not in Redis: losing Redis then loses nothing. A dispatcher looks
 * at its own deployment's leases only (QUEUE_PREFIX).
 *
 * The claims whose jobs are lost are made by a relay without a worker (claimIntoQueue: the
 * product's claim and queue), so that the jobs sit in Redis, run by nobody, until Redis loses them.
 */
const RETRY_MS = 3_000;
/** The visibility timeout of the lost claims and of the dispatchers. */
const VISIBILITY_MS = 1_000;
const ENV = { DELIVERY_RETRY_DELAYS_MS: `${RETRY_MS},${RETRY_MS},${RETRY_MS}`, DISPATCHER_VISIBILITY_TIMEOUT_MS: String(VISIBILITY_MS) };

describe("work whose job Redis lost", () => {
  let stack: Stack;
  let redis: RedisClient;
  let deliveries: Queue;
  let dispatcher: ServiceProcess | undefined;

  beforeAll(async () => {
    stack = await startStack({ dispatcher: false, env: ENV });
    redis = createRedisConnection(testRedisUrl(), "worker");
    deliveries = new Queue(QUEUE_NAMES.deliveries, { connection: redis, prefix: stack.keyPrefix });
  });
  afterAll(() =>
    endChaosFile(
      stack,
      () => deliveries?.close(),
      () => redis?.quit().catch(() => undefined),
    ),
  );

  /** Stops this file's dispatcher process, if one runs (SIGTERM: it drains and leaves the deployment). */
  const stopDispatcher = async () => {
    if (!dispatcher?.running()) return;
    dispatcher.child.kill("SIGTERM");
    await waitForExit(dispatcher, 20_000);
  };

  /** Claims `count` units of work into Redis, checks their jobs are there, then Redis loses them. Returns when the claim was made (ms). */
  const claimAndLose = async (count: number) => {
    const claimedAt = Date.now();
    const claimed = await claimIntoQueue(stack, { count, visibilityTimeoutMs: VISIBILITY_MS, redisUrl: testRedisUrl() });
    expect(claimed).toHaveLength(count);
    for (const work of claimed) expect(await deliveries.getJobState(`${work.workId}-${work.lease}`)).toBe("waiting");
    await deliveries.obliterate({ force: true });
    for (const work of claimed) expect(await deliveries.getJobState(`${work.workId}-${work.lease}`)).toBe("unknown");
    // Still leased in PostgreSQL: nothing is pending without its row.
    const { rows } = await stack.pool.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM work_items WHERE work_id = ANY($1) AND leased_until > now()",
      [claimed.map((w) => w.workId)],
    );
    expect(rows[0].n).toBe(count);
    return { claimed, claimedAt };
  };

  test("a test delivery, a destination and a replay lost with their jobs are each delivered once, after their leases expire", async () => {
    const hr = await startHookReceiver(stack);
    const hook = await createHook(stack, hr, "/lost", ["message.sent"]);
    const posted = await stack.api("POST", "/v1/events", { event_type: "message.sent", data: sampleData("message.sent") });
    expect(posted.status).toBe(201);
    const eventId = posted.body.event_id as string;
    const replay = await stack.api("POST", `/v1/events/${eventId}/replay`);
    expect(replay.status).toBe(202);

    // The three units of work are claimed and their jobs reach Redis; then Redis loses them all.
    const { claimedAt } = await claimAndLose(3);

    dispatcher = startDispatcher("dispatcher", { QUEUE_PREFIX: stack.prefix, ...ENV });
    const detail = await waitUntil(
      () => stack.api("GET", `/v1/events/${eventId}`),
      (r) => r.body.status === "delivered",
      30_000,
    );
    await waitUntil(
      () => deliveryRows(stack, { webhook_id: hook.id }),
      (rows) => rows.length === 3,
      20_000,
    );
    const arrivals = hr.receiver.arrivals.filter((a) => a.path === "/lost");
    expect(arrivals.map((a) => eventOf(a)).sort()).toEqual(["message.sent", "message.sent", "webhook.test"]);
    // Not before the lost claims' leases expired: nothing else could have sent them.
    for (const arrival of arrivals) expect(arrival.receivedAt).toBeGreaterThanOrEqual(claimedAt + VISIBILITY_MS);
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
    // Every unit of work ended with its row: nothing is left to claim, so nothing more can come.
    expect((await stack.pool.query("SELECT count(*)::int AS n FROM work_items WHERE queue_prefix = $1", [stack.prefix])).rows[0].n).toBe(0);
    await expect(hr.receiver.waitFor((all) => all.filter((a) => a.path === "/lost").length > 3, 3 * VISIBILITY_MS)).rejects.toThrow(
      TIMED_OUT,
    );
    expect(dispatcher.running()).toBe(true);
    await stopDispatcher();
  });

  test("a destination between two attempts waits in PostgreSQL (Redis may lose everything); its retry, claimed and lost, is delivered once at retry 1, not before its delay", async () => {
    const hr = await startHookReceiver(stack, (a, nth) => (nth === 1 ? { status: 500 } : {}));
    const hook = await createHook(stack, hr, "/mid-retry", ["message.delivered"]);
    // A dispatcher makes the initial attempt (500) and the test event, then stops.
    dispatcher = startDispatcher("dispatcher-initial", { QUEUE_PREFIX: stack.prefix, ...ENV });
    const posted = await stack.api("POST", "/v1/events", { event_type: "message.delivered", data: sampleData("message.delivered") });
    const eventId = posted.body.event_id as string;
    const [{ id: destinationId }] = await stack.prisma.destination.findMany({ where: { eventId }, select: { id: true } });
    const [failure] = emailArrivals(await hr.receiver.waitFor((a) => emailArrivals(a, "/mid-retry").length === 1, 30_000), "/mid-retry");
    expect(failure.status).toBe(500);
    const retryWaits = await waitUntil(
      () => stack.pool.query("SELECT attempt, leased_until FROM work_items WHERE work_id = $1", [destinationId]).then((r) => r.rows),
      (rows) => rows.length === 1 && rows[0].attempt === 1 && rows[0].leased_until === null,
      10_000,
    );
    expect(retryWaits).toHaveLength(1);
    await stopDispatcher();
    // Between the two attempts Redis holds nothing of it: losing everything there loses nothing.
    const jobsOfIt = await deliveries.getJobs(["wait", "prioritized", "delayed", "active"]);
    expect(jobsOfIt.filter((job) => job.data?.workId === destinationId)).toEqual([]);
    await deliveries.obliterate({ force: true });

    // Retry 1 comes due and is claimed; its job is lost.
    await waitUntil(
      () =>
        stack.pool.query("SELECT due_at <= now() AS due FROM work_items WHERE work_id = $1", [destinationId]).then((r) => r.rows[0].due),
      (due) => due === true,
      RETRY_MS + 5_000,
    );
    await claimAndLose(1);

    dispatcher = startDispatcher("dispatcher", { QUEUE_PREFIX: stack.prefix, ...ENV });
    const arrivals = emailArrivals(await hr.receiver.waitFor((a) => emailArrivals(a, "/mid-retry").length === 2, 30_000), "/mid-retry");
    // Not early: the retry kept its due time.
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
    await expect(hr.receiver.waitFor((a) => emailArrivals(a, "/mid-retry").length > 2, 3 * VISIBILITY_MS)).rejects.toThrow(TIMED_OUT);
  });

  test("another deployment's expired leases (another QUEUE_PREFIX, same database) are left alone", async () => {
    // This deployment's dispatcher (started by the test before) runs.
    expect(dispatcher?.running()).toBe(true);
    const other = await startStack({ dispatcher: false });
    try {
      const hr = await startHookReceiver(other);
      await createHook(other, hr, "/theirs", ["message.sent"]);
      const posted = await other.api("POST", "/v1/events", { event_type: "message.sent", data: sampleData("message.sent") });
      const [{ id: destinationId }] = await other.prisma.destination.findMany({
        where: { eventId: posted.body.event_id },
        select: { id: true },
      });
      // Its work as a dead dispatcher of its own deployment left it: leased, the lease expired.
      await other.pool.query(
        "UPDATE work_items SET lease = lease + 1, leased_until = now() - interval '1 second' WHERE queue_prefix = $1",
        [other.prefix],
      );
      // This deployment's dispatcher goes on claiming (each of its events is a claim, and each claim
      // ends the expired leases it sees) well past that expiry.
      const mine = await startHookReceiver(stack);
      await createHook(stack, mine, "/mine", ["message.sent"]);
      for (let i = 0; i < 3; i++) {
        const data = sampleData("message.sent");
        expect((await stack.api("POST", "/v1/events", { event_type: "message.sent", data })).status).toBe(201);
        await mine.receiver.waitFor((all) => emailArrivals(all, "/mine").some((a) => a.messageId === data.messageId), 20_000);
      }
      const { rows } = await other.pool.query(
        "SELECT lease, expirations, leased_until < now() AS expired FROM work_items WHERE work_id = $1",
        [destinationId],
      );
      expect(rows).toEqual([{ lease: 1, expirations: 0, expired: true }]);
      expect((await other.prisma.destination.findUnique({ where: { id: destinationId } }))?.status).toBe("pending");
      expect(hr.receiver.arrivals).toHaveLength(0);
    } finally {
      await other.close();
    }
  });
});

import { Queue, UnrecoverableError, Worker } from "bullmq";
import type { Redis } from "ioredis";
import { acceptEvents, attemptBudgetOf } from "@mailhooks/delivery-state";
import { createRedisConnection, DeliveryQueue, QUEUE_NAMES } from "@mailhooks/queue";
import { sweepLostWork } from "../../apps/dispatcher/src/jobs/sweep-lost-work.js";
import { POISONED_MARK } from "../../apps/dispatcher/src/worker.js";
import { sampleData, startStack, waitUntil, type Stack, queued } from "../support/stack.js";
import { createHook, emailArrivals, startHookReceiver } from "../support/hooks.js";
import { testRedisUrl } from "../support/env.js";
import { endChaosFile, startDispatcher } from "./support/processes.js";

/**
 * The sweeper (apps/dispatcher/src/jobs/sweep-lost-work.ts) against real PostgreSQL and Redis:
 * - pending work behind a job that failed for good (its worker could not end the work) is ended
 *   `failed` at once, neither left waiting for the failed job's removal nor sent again;
 * - a run walks batch after batch within its time budget: a dispatcher's first sweep finds more
 *   lost work than one batch holds, and queues it all;
 * - a kind whose batch fails does not keep the other kinds from being swept.
 */
const RETRY_DELAYS = [1000, 1000, 1000];

describe("the sweeper", () => {
  let stack: Stack;
  let redis: Redis;
  let queue: DeliveryQueue;
  beforeAll(async () => {
    // Accepted work reaches Redis through the in-process relay; no worker takes it.
    stack = await startStack({ dispatcher: "relay-only" });
    redis = createRedisConnection(testRedisUrl(), "worker") as Redis;
    queue = new DeliveryQueue(redis, stack.prefix, attemptBudgetOf(RETRY_DELAYS));
  });
  afterAll(() =>
    endChaosFile(
      stack,
      () => queue?.close(),
      () => redis?.quit().catch(() => undefined),
    ),
  );

  const sweep = (extra: Partial<Parameters<typeof sweepLostWork>[0]> = {}) =>
    sweepLostWork({ pool: stack.pool, redis, queue, queuePrefix: stack.prefix, retryDelaysMs: RETRY_DELAYS, afterMs: 0, ...extra });
  const inOutbox = async (id: string) =>
    (await stack.pool.query("SELECT count(*)::int AS n FROM outbox WHERE job_id = $1", [id])).rows[0].n as number;

  test("pending work whose job failed for good is ended failed, not kept alive nor sent again", async () => {
    const acct = await stack.newAccount();
    const hr = await startHookReceiver(stack);
    const hook = await createHook(acct, hr, "/poison", ["message.sent"]);
    const posted = await acct.api("POST", "/v1/events", { event_type: "message.sent", data: sampleData("message.sent") });
    expect(posted.status).toBe(201);
    const eventId = posted.body.event_id as string;
    const [{ id: destinationId }] = await stack.prisma.destination.findMany({ where: { eventId }, select: { id: true } });
    const [{ id: testDeliveryId }] = await stack.prisma.testDelivery.findMany({ where: { webhookId: hook.id }, select: { id: true } });
    await waitUntil(
      () => queue.queue.getJobState(destinationId),
      (s) => queued(s),
    );
    await waitUntil(
      () => queue.queue.getJobState(testDeliveryId),
      (s) => queued(s),
    );

    // A worker fails both jobs for good, as the dispatcher's does, but could not end their work
    // (PostgreSQL was away at that moment): the work stays pending behind failed jobs.
    const worker = new Worker(
      QUEUE_NAMES.deliveries,
      async () => {
        throw new UnrecoverableError(`${POISONED_MARK} a constraint`);
      },
      { connection: redis, prefix: stack.prefix },
    );
    try {
      await waitUntil(
        async () => Promise.all([queue.queue.getJobState(destinationId), queue.queue.getJobState(testDeliveryId)]),
        (s) => s.every((x) => x === "failed"),
      );
    } finally {
      await worker.close();
    }
    expect((await stack.prisma.destination.findUniqueOrThrow({ where: { id: destinationId } })).status).toBe("pending");

    expect(await sweep()).toBe(0);
    expect((await stack.prisma.destination.findUniqueOrThrow({ where: { id: destinationId } })).status).toBe("failed");
    expect((await stack.prisma.testDelivery.findUniqueOrThrow({ where: { id: testDeliveryId } })).status).toBe("failed");
    expect((await acct.api("GET", `/v1/events/${eventId}`)).body.status).toBe("failed");
    // Not queued again: nothing in the outbox, the failed jobs stay as they were, nothing sent.
    expect(await inOutbox(destinationId)).toBe(0);
    expect(await inOutbox(testDeliveryId)).toBe(0);
    expect(await queue.queue.getJobState(destinationId)).toBe("failed");
    expect(hr.receiver.arrivals).toHaveLength(0);
    // Later runs leave it alone.
    expect(await sweep()).toBe(0);
  });

  test("a kind whose batch fails does not keep the others from being swept", async () => {
    const acct = await stack.newAccount();
    const hr = await startHookReceiver(stack);
    const hook = await createHook(acct, hr, "/kinds", ["message.sent"]);
    const posted = await acct.api("POST", "/v1/events", { event_type: "message.sent", data: sampleData("message.sent") });
    const replay = await acct.api("POST", `/v1/events/${posted.body.event_id}/replay`);
    expect(replay.status).toBe(202);
    const replayId = replay.body.replays[0].replay_id as string;
    const [{ id: testDeliveryId }] = await stack.prisma.testDelivery.findMany({ where: { webhookId: hook.id }, select: { id: true } });
    await waitUntil(
      () => queue.queue.getJobState(replayId),
      (s) => queued(s),
    );
    await waitUntil(
      () => queue.queue.getJobState(testDeliveryId),
      (s) => queued(s),
    );
    // Redis loses the replay's and the test delivery's jobs...
    await queue.queue.remove(replayId);
    await queue.queue.remove(testDeliveryId);
    // ...and the destinations' sweep fails (its cursor is not a string: WRONGTYPE).
    const cursorKey = queue.queue.toKey("sweep-cursor:delivery");
    await redis.del(cursorKey);
    await redis.hset(cursorKey, "not", "a string");
    try {
      const kindErrors: string[] = [];
      await sweep({ onKindError: (kind) => kindErrors.push(kind) });
      expect(kindErrors).toEqual(["delivery"]);
      // The kinds after the failing one were swept.
      // (Queued again: in the outbox, or already moved on by the stack's relay; both can show for
      // a moment while the relay's transaction commits, so this asks for either.)
      const requeued = async (id: string) => (await inOutbox(id)) > 0 || (await queue.queue.getJobState(id)) !== "unknown";
      expect(await requeued(replayId)).toBe(true);
      expect(await requeued(testDeliveryId)).toBe(true);
      // Without a callback the failure is thrown, after every kind was tried.
      await expect(sweep()).rejects.toThrow(/WRONGTYPE/);
    } finally {
      await redis.del(cursorKey);
    }
  });
});

describe("a sweep run walks batch after batch within its budget", () => {
  let stack: Stack;
  let redis: Redis;
  let deliveries: Queue;
  beforeAll(async () => {
    stack = await startStack({ dispatcher: "relay-only" });
    redis = createRedisConnection(testRedisUrl(), "worker") as Redis;
    deliveries = new Queue(QUEUE_NAMES.deliveries, { connection: redis, prefix: stack.prefix });
  });
  afterAll(() =>
    endChaosFile(
      stack,
      () => deliveries?.close(),
      () => redis?.quit().catch(() => undefined),
    ),
  );

  test("a dispatcher's first sweep queues 13 lost destinations with batches of 5, not only the first batch", async () => {
    const hr = await startHookReceiver(stack);
    await createHook(stack, hr, "/backlog", ["message.sent"]);
    const events = Array.from({ length: 13 }, () => ({
      eventType: "message.sent" as const,
      data: sampleData("message.sent") as any,
      occurredAt: new Date(),
    }));
    await acceptEvents(stack.pool, stack.accountId, stack.prefix, events);
    await waitUntil(
      () => deliveries.getJobCounts("wait", "prioritized"),
      (c) => c.wait + c.prioritized === 14,
    ); // 13 + the test delivery, in the wait list or the prioritized set
    // Redis loses them all; they are older than SWEEP_AFTER_MS before the dispatcher starts.
    await deliveries.obliterate({ force: true });
    await waitUntil(
      async () =>
        (
          await stack.pool.query(
            "SELECT bool_and(created_at < now() - interval '1100 ms') AS old FROM destinations WHERE queue_prefix = $1",
            [stack.prefix],
          )
        ).rows[0].old,
      (old) => old === true,
      10_000,
    );
    // One sweep run at start, the next one ten minutes later: only a run that goes on past its
    // first batch delivers them all in time.
    startDispatcher("dispatcher", {
      QUEUE_PREFIX: stack.prefix,
      SWEEP_INTERVAL_MS: "600000",
      SWEEP_AFTER_MS: "1000",
      SWEEP_BATCH_SIZE: "5",
    });
    const arrivals = await hr.receiver.waitFor((all) => emailArrivals(all, "/backlog").length >= 13, 30_000);
    expect(new Set(emailArrivals(arrivals, "/backlog").map((a) => a.messageId)).size).toBe(13);
  }, 60_000);
});

import { Queue } from "bullmq";
import type { Redis } from "ioredis";
import { newId } from "@mailhooks/db";
import { buildEnvelope } from "@mailhooks/events";
import { createRedisConnection, JOB_NAMES, QUEUE_NAMES } from "@mailhooks/queue";
import { verifySignature } from "@mailhooks/signing";
import { sampleData, startStack, waitUntil, type Stack } from "../support/stack.js";
import { createHook, deliveryRows, emailArrivals, startHookReceiver } from "../support/hooks.js";
import { testRedisUrl } from "../support/env.js";
import { scratchDatabase, type ScratchDatabase } from "./support/database.js";
import { killAll, startDispatcher } from "./support/processes.js";

/**
 * Issue 4, item 6: no event is lost between PostgreSQL and Redis.
 *
 * The API commits an event and its destinations, then queues one job per destination. An API
 * that dies between the two leaves pending destinations without a job; the dispatchers' sweeper
 * (a BullMQ job scheduler, SWEEP_INTERVAL_MS) queues every pending destination that has no
 * attempt SWEEP_AFTER_MS after its creation, under the destination's id as job id, so that
 * however many dispatchers sweep, one job exists and the receiver gets the event once.
 *
 * The other half of the item, an ingest while Redis is unreachable (503, nothing stored, idempotency
 * key included), is proved by tests/e2e/api-errors.test.ts, "503 unavailable when Redis is
 * unreachable".
 *
 * The sweeper scans the whole database, so this file runs on a database of its own: other test
 * files running at the same time keep pending destinations of their own in the shared one.
 */
const SWEEP_INTERVAL_MS = 1_000;
const SWEEP_AFTER_MS = 1_000;

describe("an event committed by an API that died before queueing it", () => {
  let db: ScratchDatabase;
  let stack: Stack;
  let redis: Redis;
  let deliveries: Queue;
  let maintenance: Queue;

  beforeAll(async () => {
    db = await scratchDatabase("sweep");
    // The API only creates the account and the webhook; no in-process dispatcher.
    stack = await startStack({ env: { DATABASE_URL: db.url }, dispatcher: false });
    redis = createRedisConnection(testRedisUrl(), "worker");
    deliveries = new Queue(QUEUE_NAMES.deliveries, { connection: redis, prefix: stack.prefix });
    maintenance = new Queue(QUEUE_NAMES.maintenance, { connection: redis, prefix: stack.prefix });
  });
  afterAll(async () => {
    await killAll();
    // The maintenance queue and its schedulers, left by the dispatchers.
    await maintenance?.obliterate({ force: true }).catch(() => undefined);
    await Promise.all([deliveries?.close(), maintenance?.close()]);
    await redis?.quit().catch(() => undefined);
    await stack?.close();
    await db?.drop();
  });

  /**
   * Commits an event and its one destination as the API's ingest does (with, when
   * `failedOnce`, a failed initial attempt at `createdAt`), and queues no job.
   */
  async function commitWithoutJob(hook: { id: string; url: string }, createdAt: Date, failedOnce: boolean) {
    const eventId = newId("evt");
    const destinationId = newId("dst");
    const data = sampleData("message.sent");
    const payload = buildEnvelope("message.sent", createdAt, data);
    await stack.prisma.$transaction([
      stack.prisma.$executeRaw`
        INSERT INTO events (id, account_id, event_type, inbox_id, message_id, thread_id, status, pending_destinations, payload, occurred_at, created_at)
        VALUES (${eventId}, ${stack.accountId}, 'message.sent', ${data.inboxId as string}, ${data.messageId as string},
                ${data.threadId as string}, 'pending', 1, ${payload}, ${createdAt}, ${createdAt})`,
      stack.prisma.$executeRaw`
        INSERT INTO destinations (id, account_id, event_id, webhook_id, created_at, updated_at)
        VALUES (${destinationId}, ${stack.accountId}, ${eventId}, ${hook.id}, ${createdAt}, ${createdAt})`,
      ...(failedOnce
        ? [
            stack.prisma.$executeRaw`
              INSERT INTO deliveries (id, account_id, event_id, webhook_id, destination_id, url, trigger, attempt, response_status, duration_ms, created_at)
              VALUES (${newId("dlv")}, ${stack.accountId}, ${eventId}, ${hook.id}, ${destinationId}, ${hook.url}, 'initial', 0, 500, 3, ${createdAt})`,
          ]
        : []),
    ]);
    return { eventId, destinationId, payload };
  }

  test("is delivered once by the sweeper, with a verified signature, and never again", async () => {
    const hr = await startHookReceiver(stack);
    const hook = await createHook(stack, hr, "/lost", ["message.sent"]);

    // What the API's ingest commits (apps/api/src/services/events.ts), a few seconds ago,
    // without the job it would have queued next.
    const { eventId, destinationId, payload } = await commitWithoutJob(hook, new Date(Date.now() - 5_000), false);
    expect(await deliveries.getJobState(destinationId)).toBe("unknown");

    // Two dispatchers, both running the sweeper's scheduler on the same prefix.
    const env = { DATABASE_URL: db.url, QUEUE_PREFIX: stack.prefix, SWEEP_INTERVAL_MS: String(SWEEP_INTERVAL_MS), SWEEP_AFTER_MS: String(SWEEP_AFTER_MS) };
    const dispatchers = [startDispatcher("dispatcher-a", env), startDispatcher("dispatcher-b", env)];

    const arrivals = emailArrivals(await hr.receiver.waitFor((a) => emailArrivals(a, "/lost").length >= 1, 30_000), "/lost");
    expect(arrivals[0].body).toBe(payload);
    expect(arrivals[0].verified).toBe(true);
    expect(verifySignature({ secret: hook.secret, timestamp: arrivals[0].timestamp, signature: arrivals[0].signature, body: arrivals[0].body })).toBe(true);

    const detail = await waitUntil(() => stack.api("GET", `/v1/events/${eventId}`), (r) => r.body.status !== "pending");
    expect(detail.body.status).toBe("delivered");
    expect(detail.body.destinations).toEqual([{ webhook_id: hook.id, url: hook.url, status: "delivered", attempts: 1 }]);
    expect(JSON.stringify(detail.body.payload)).toBe(payload);

    // Further sweeps run (the scheduler's next run moves on by at least two periods) and queue
    // nothing again: the destination is no longer pending.
    const scheduler = await maintenance.getJobScheduler(JOB_NAMES.sweep);
    expect(scheduler).toBeDefined();
    const firstNext = scheduler!.next!;
    await waitUntil(() => maintenance.getJobScheduler(JOB_NAMES.sweep), (s) => (s?.next ?? 0) >= firstNext + 2 * SWEEP_INTERVAL_MS, 15_000);
    // ...and the last of those sweeps has had time to finish.
    await waitUntil(() => maintenance.getJobCounts("active", "wait"), (c) => c.active === 0 && c.wait === 0, 5_000);

    expect(emailArrivals(hr.receiver.arrivals, "/lost")).toHaveLength(1);
    const rows = await deliveryRows(stack, { event_id: eventId });
    expect(rows.map((r) => [r.attempt, r.trigger, r.response_status, r.error])).toEqual([[0, "initial", 200, null]]);
    for (const d of dispatchers) expect(d.running()).toBe(true);
  });

  test("a retry whose job Redis lost is queued again at its attempt number, and ends the destination", async () => {
    const hr = await startHookReceiver(stack);
    const hook = await createHook(stack, hr, "/lost-retry", ["message.sent"]);
    // The initial attempt failed ten minutes ago and its retry job is gone (Redis lost its data):
    // longer silent than the longest retry delay plus the deadline, so the sweeper takes it.
    const { eventId, destinationId } = await commitWithoutJob(hook, new Date(Date.now() - 600_000), true);
    expect(await deliveries.getJobState(destinationId)).toBe("unknown");

    await hr.receiver.waitFor((a) => emailArrivals(a, "/lost-retry").length >= 1, 30_000);
    const detail = await waitUntil(() => stack.api("GET", `/v1/events/${eventId}`), (r) => r.body.status !== "pending");
    expect(detail.body.status).toBe("delivered");
    const rows = await deliveryRows(stack, { event_id: eventId });
    expect(rows.map((r) => [r.attempt, r.trigger, r.response_status])).toEqual([
      [0, "initial", 500],
      [1, "retry", 200],
    ]);
  });
});

import { Queue } from "bullmq";
import type { Redis } from "ioredis";
import { dispatcherConfigSchema, loadConfig } from "@mailhooks/config";
import { createRedisConnection, QUEUE_NAMES } from "@mailhooks/queue";
import { MAX_STALLED_COUNT } from "../../apps/dispatcher/src/worker.js";
import { startInProcessDispatcher, type InProcessDispatcher } from "../support/delivery-worker.js";
import { testDatabaseUrl, testRedisUrl } from "../support/env.js";
import { createHook, deliveryRows, emailArrivals, startHookReceiver } from "../support/hooks.js";
import { queued, sampleData, startStack, waitUntil, type Stack } from "../support/stack.js";
import { endChaosFile } from "./support/processes.js";
import { LOOPBACK_TARGETS } from "@mailhooks/url-policy";

/**
 * A job that kept killing the dispatchers that ran it (taken over more than MAX_STALLED_COUNT
 * times) is failed by BullMQ itself, without being run; its work then ends `failed` with an
 * `internal_error` row (CONTRACT.md section 8). The worker knows such a job by its stall count,
 * not by the wording of BullMQ's failure: here that wording is not BullMQ's, and the work ends
 * all the same. A hundred real takeovers would take minutes, so the job is marked as BullMQ's
 * stalled-job check marks it past the limit: its stall count (`stc`) and the deferred failure
 * (`defa`) that makes the next worker fail it on sight.
 */
describe("a job past the stall limit", () => {
  let stack: Stack;
  let redis: Redis;
  let deliveries: Queue;
  let dispatcher: InProcessDispatcher | undefined;
  beforeAll(async () => {
    // Accepted work reaches Redis through the in-process relay; no worker takes it yet.
    stack = await startStack({ dispatcher: "relay-only" });
    redis = createRedisConnection(testRedisUrl(), "worker") as Redis;
    deliveries = new Queue(QUEUE_NAMES.deliveries, { connection: redis, prefix: stack.keyPrefix });
  });
  afterAll(() =>
    endChaosFile(
      stack,
      () => dispatcher?.close(),
      () => deliveries?.close(),
      () => redis?.quit().catch(() => undefined),
    ),
  );

  test("ends its work failed with an internal_error row, and is never sent", async () => {
    const acct = await stack.newAccount();
    const hr = await startHookReceiver(stack);
    await createHook(acct, hr, "/stalled", ["message.sent"]);
    const posted = await acct.api("POST", "/v1/events", { event_type: "message.sent", data: sampleData("message.sent") });
    expect(posted.status).toBe(201);
    const eventId = posted.body.event_id as string;
    const [{ id: destinationId }] = await stack.prisma.destination.findMany({ where: { eventId }, select: { id: true } });
    await waitUntil(
      () => deliveries.getJobState(destinationId),
      (state) => queued(state),
    );

    await redis.hset(deliveries.toKey(destinationId), "stc", String(MAX_STALLED_COUNT + 1), "defa", "gave up on this job (any wording)");
    const config = loadConfig(dispatcherConfigSchema, {
      DATABASE_URL: testDatabaseUrl(),
      REDIS_URL: testRedisUrl(),
      QUEUE_PREFIX: stack.prefix,
      ALLOW_PRIVATE_TARGETS: LOOPBACK_TARGETS,
      DISPATCHER_CONCURRENCY: "4",
    });
    dispatcher = startInProcessDispatcher(stack.pool, config, {
      queuePrefix: stack.prefix,
      keyPrefix: stack.keyPrefix,
      parts: "worker-only",
    });

    const ended = await waitUntil(
      () => stack.prisma.destination.findUniqueOrThrow({ where: { id: destinationId } }),
      (d) => d.status !== "pending",
    );
    expect(ended.status).toBe("failed");
    expect((await acct.api("GET", `/v1/events/${eventId}`)).body.status).toBe("failed");
    const rows = await deliveryRows(acct, { event_id: eventId });
    expect(rows.map((r) => [r.trigger, r.attempt, r.response_status, r.error])).toEqual([["initial", 0, null, "internal_error"]]);
    expect(await deliveries.getJobState(destinationId)).toBe("failed");
    expect(emailArrivals(hr.receiver.arrivals, "/stalled")).toEqual([]);
  });
});

import { randomUUID } from "node:crypto";
import { dispatcherConfigSchema, loadConfig } from "@mailhooks/config";
import { createPool } from "@mailhooks/db";
import { attemptBudgetOf, enqueue, relayOutbox, releaseLeases } from "@mailhooks/delivery-state";
import { getLogger } from "@mailhooks/logger";
import { createRedisConnection, DeliveryQueue, JOB_NAMES, type RedisClient } from "@mailhooks/queue";
import { createDispatcherMetrics } from "./metrics.js";
import { startConfiguredRelay, type Relay } from "./relay.js";

/**
 * The relay against the test database and a real Redis, with a poll interval longer than the
 * test: only notifications and wakes move it. A webhook at its job limit gets its next jobs when
 * its leases end and its dispatcher says so (Relay.room), not at the next poll.
 */
const databaseUrl = process.env.TEST_DATABASE_URL ?? "postgresql://postgres@127.0.0.1:5432/webhooks_test";
const redisUrl = process.env.REDIS_URL ?? "redis://127.0.0.1:6379";

describe("the outbox relay", () => {
  const pool = createPool(databaseUrl, 4);
  const queuePrefix = `test-relay-${randomUUID()}`;
  let connection: RedisClient;
  let queue: DeliveryQueue;
  let relay: Relay | undefined;

  beforeAll(() => {
    connection = createRedisConnection(redisUrl, "producer");
    queue = new DeliveryQueue(connection, queuePrefix, attemptBudgetOf([100, 100, 100]));
  });
  afterAll(async () => {
    await relay?.close();
    await pool.query("DELETE FROM outbox WHERE queue_prefix = $1", [queuePrefix]);
    await pool.query("DELETE FROM webhook_leases WHERE queue_prefix = $1", [queuePrefix]);
    await queue.queue.obliterate({ force: true });
    await queue.queue.close();
    await connection.quit();
    await pool.end();
  });

  const jobIds = async () => (await queue.queue.getJobs(["prioritized", "waiting"])).map((job) => job.id!).sort();

  async function until<T>(read: () => Promise<T>, done: (value: T) => boolean, ms = 5_000): Promise<T> {
    const deadline = Date.now() + ms;
    for (;;) {
      const value = await read();
      if (done(value)) return value;
      if (Date.now() > deadline) throw new Error(`not reached within ${ms} ms: ${JSON.stringify(value)}`);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }

  /** `count` delivery jobs of one webhook in the outbox of `prefix`, oldest first; their work ids. */
  async function enqueueWork(prefix: string, webhookId: string, count: number): Promise<string[]> {
    const work = Array.from({ length: count }, (_, i) => `dst_${webhookId}_${i}_${randomUUID()}`);
    await enqueue(
      pool,
      prefix,
      work.map((id) => ({
        jobName: JOB_NAMES.delivery,
        jobId: id,
        data: { destinationId: id },
        webhookId,
        accountId: `acct_${webhookId}`,
      })),
    );
    return work;
  }

  test("a webhook at its job limit gets its next jobs when its leases end, woken by room", async () => {
    const work = await enqueueWork(queuePrefix, "wh_relay", 5);
    const config = loadConfig(dispatcherConfigSchema, {
      DATABASE_URL: databaseUrl,
      RELAY_POLL_INTERVAL_MS: "600000",
      DISPATCHER_WEBHOOK_JOB_LIMIT: "2",
    });
    relay = startConfiguredRelay(config, {
      pool,
      queue,
      queuePrefix,
      logger: getLogger("relay-test"),
      metrics: createDispatcherMetrics(),
    });
    // The first pass (on connecting) hands the webhook its limit, the oldest first.
    expect(await until(jobIds, (ids) => ids.length === 2)).toEqual(work.slice(0, 2).sort());
    // Their work ends, with the webhook's next work waiting: room brings the next two, long before any poll.
    expect(await releaseLeases(pool, work.slice(0, 2))).toEqual([]);
    relay.room();
    await queue.queue.remove(work[0]);
    await queue.queue.remove(work[1]);
    expect(await until(jobIds, (ids) => ids.length === 2 && ids.includes(work[2]))).toEqual(work.slice(2, 4).sort());
  });

  test("a pass says whether it held work back (what decides whether an ended lease wakes the relay)", async () => {
    const prefix = `${queuePrefix}-held`;
    const work = await enqueueWork(prefix, "wh_held", 5);
    const pass = () => relayOutbox(pool, prefix, 500, async () => [], {}, 2);
    try {
      expect(await pass()).toEqual({ claimed: 2, rejected: [], heldBack: true });
      // At its limit: nothing taken, still held back.
      expect(await pass()).toEqual({ claimed: 0, rejected: [], heldBack: true });
      await releaseLeases(pool, work.slice(0, 2));
      expect(await pass()).toEqual({ claimed: 2, rejected: [], heldBack: true });
      await releaseLeases(pool, work.slice(2, 4));
      // The last row fits: nothing is left waiting.
      expect(await pass()).toEqual({ claimed: 1, rejected: [], heldBack: false });
      expect(await pass()).toEqual({ claimed: 0, rejected: [], heldBack: false });
    } finally {
      await pool.query("DELETE FROM outbox WHERE queue_prefix = $1", [prefix]);
      await pool.query("DELETE FROM webhook_leases WHERE queue_prefix = $1", [prefix]);
    }
  });
});

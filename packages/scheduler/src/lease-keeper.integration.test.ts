import { randomUUID } from "node:crypto";
import pg from "pg";
import { startRedisServer, type RedisServer } from "@mailhooks/processes";
import { createRedisConnection, QUEUE_NAMES, type RedisClient } from "@mailhooks/queue";
import { startLeaseKeeper } from "./lease-keeper.js";

/**
 * The lease keeper against the test database and a private redis-server that is made to hang:
 * a pass waiting on Redis is not joined by the passes of the ticks meanwhile (they would queue up
 * without bound and all run once Redis answers).
 */
const databaseUrl = process.env.TEST_DATABASE_URL ?? "postgresql://postgres@127.0.0.1:5432/webhooks_test";

describe("lease keeper", () => {
  const pool = new pg.Pool({ connectionString: databaseUrl, max: 2 });
  const queuePrefix = `test-keeper-${randomUUID()}`;
  let redisServer: RedisServer;
  let redis: RedisClient;

  beforeAll(async () => {
    redisServer = await startRedisServer();
    redis = createRedisConnection(redisServer.url, "worker");
  });
  afterAll(async () => {
    redisServer?.thaw();
    await redis?.quit().catch(() => undefined);
    await redisServer?.destroy();
    await pool.query("DELETE FROM webhook_leases WHERE queue_prefix = $1", [queuePrefix]);
    await pool.end();
  });

  test("a tick while a pass waits on a hung Redis is skipped, not queued", async () => {
    // A lease whose job lives: each pass reads it and asks Redis about its job.
    await pool.query(
      "INSERT INTO webhook_leases (work_id, queue_prefix, webhook_id, account_id, job_name) VALUES ($1, $2, 'wh_keeper', 'acct_keeper', 'deliver-destination')",
      [`dst_keeper_${randomUUID()}`, queuePrefix],
    );
    const { rows } = await pool.query<{ work_id: string }>("SELECT work_id FROM webhook_leases WHERE queue_prefix = $1", [queuePrefix]);
    await redis.hset(`${queuePrefix}:${QUEUE_NAMES.deliveries}:${rows[0].work_id}`, "timestamp", String(Date.now()));

    let passes = 0;
    const counted = { query: (...args: Parameters<pg.Pool["query"]>) => (passes++, pool.query(...args)) } as unknown as pg.Pool;
    redisServer.freeze();
    const keeper = startLeaseKeeper({ pool: counted, redis, keyPrefix: queuePrefix, queuePrefix, intervalMs: 10, graceMs: 0 });
    // The first pass has read its lease and waits on Redis; forty more ticks go by.
    const deadline = Date.now() + 5_000;
    while (passes === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    expect(passes).toBe(1);
    await new Promise((r) => setTimeout(r, 400));
    redisServer.thaw();
    await keeper.close();
    // The hung pass, and at most a tick or two between the thaw and the close.
    expect(passes).toBeLessThanOrEqual(3);
  });
});

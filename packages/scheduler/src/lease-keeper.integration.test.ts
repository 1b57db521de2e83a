import { randomUUID } from "node:crypto";
import pg from "pg";
import { startRedisServer, type RedisServer } from "@mailhooks/processes";
import { createRedisConnection, QUEUE_NAMES, type RedisClient } from "@mailhooks/queue";
import { keepLeases, leaseWalkKey, startLeaseKeeper } from "./lease-keeper.js";

/**
 * The lease keeper against the test database and a private redis-server that is made to hang:
 * a pass waiting on Redis is not joined by the passes of the ticks meanwhile (they would queue up
 * without bound and all run once Redis answers); and a deployment with many leases costs a pass
 * a bounded number of checks, however many there are.
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

    // A pass begins by reading the walk's cursor from Redis: count those reads.
    let passes = 0;
    const counted = new Proxy(redis, {
      get(target, property) {
        if (property === "get") return (key: string) => (passes++, target.get(key));
        const value: unknown = Reflect.get(target, property, target);
        return typeof value === "function" ? (value as (...args: unknown[]) => unknown).bind(target) : value;
      },
    });
    redisServer.freeze();
    try {
      const keeper = startLeaseKeeper({ pool, redis: counted, keyPrefix: queuePrefix, queuePrefix, intervalMs: 10, graceMs: 0 });
      // The first pass waits on Redis; forty more ticks go by.
      const deadline = Date.now() + 5_000;
      while (passes === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
      expect(passes).toBe(1);
      await new Promise((r) => setTimeout(r, 400));
      redisServer.thaw();
      await keeper.close();
      // The hung pass, and at most a tick or two between the thaw and the close.
      expect(passes).toBeLessThanOrEqual(3);
    } finally {
      redisServer.thaw();
    }
  });

  /** `count` leases of a fresh prefix made a minute ago, their jobs in Redis alive but for `lost`. */
  async function seedLeases(prefix: string, count: number, lost: Set<number>): Promise<string[]> {
    const workIds = Array.from({ length: count }, (_, i) => `dst_walk_${String(i).padStart(6, "0")}`);
    await pool.query(
      `INSERT INTO webhook_leases (work_id, queue_prefix, webhook_id, account_id, job_name, created_at)
       SELECT w, $2, 'wh_walk', 'acct_walk', 'deliver-destination', now() - interval '1 minute' FROM unnest($1::text[]) w`,
      [workIds.map((w) => `${prefix}_${w}`), prefix],
    );
    const pipeline = redis.pipeline();
    workIds.forEach((w, i) => {
      if (!lost.has(i)) pipeline.hset(`${prefix}:${QUEUE_NAMES.deliveries}:${prefix}_${w}`, "timestamp", "1");
    });
    await pipeline.exec();
    return workIds;
  }
  const leasesLeft = async (prefix: string) =>
    (await pool.query<{ n: number }>("SELECT count(*)::int AS n FROM webhook_leases WHERE queue_prefix = $1", [prefix])).rows[0].n;

  test("a pass checks a bounded number of live leases and the next pass goes on from there", async () => {
    const prefix = `test-walk-${randomUUID()}`;
    // 12,000 live leases, and 12 lost ones spread through them.
    const lost = new Set(Array.from({ length: 12 }, (_, i) => i * 1_000 + 500));
    await seedLeases(prefix, 12_012, lost);
    const options = { pool, redis, keyPrefix: prefix, queuePrefix: prefix, maxLivePerPass: 3_000 };
    try {
      const passes = [];
      for (let i = 0; i < 5; i++) passes.push(await keepLeases(options));
      // Each pass stops once it has seen its budget of live leases.
      for (const pass of passes) expect(pass.checked - pass.dropped).toBeLessThanOrEqual(3_000);
      expect(passes[0].next).not.toBe("");
      expect(await redis.get(leaseWalkKey(prefix))).toBe(null);
      // Four passes and a bit walked them all: every lost lease dropped, every live one kept.
      expect(passes.reduce((n, p) => n + p.dropped, 0)).toBe(12);
      expect(await leasesLeft(prefix)).toBe(12_000);
    } finally {
      await pool.query("DELETE FROM webhook_leases WHERE queue_prefix = $1", [prefix]);
    }
  });

  test("after a flush a pass goes on while it finds lost leases: all dropped in one pass", async () => {
    const prefix = `test-flushed-${randomUUID()}`;
    await seedLeases(prefix, 10_000, new Set(Array.from({ length: 10_000 }, (_, i) => i)));
    try {
      const pass = await keepLeases({ pool, redis, keyPrefix: prefix, queuePrefix: prefix, maxLivePerPass: 1_000 });
      expect(pass).toEqual({ dropped: 10_000, checked: 10_000, next: "" });
      expect(await leasesLeft(prefix)).toBe(0);
    } finally {
      await pool.query("DELETE FROM webhook_leases WHERE queue_prefix = $1", [prefix]);
    }
  });
});

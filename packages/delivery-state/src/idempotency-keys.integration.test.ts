import { randomUUID } from "node:crypto";
import type pg from "pg";
import { createPool } from "@mailhooks/db";
import { purgeIdempotencyKeys } from "./idempotency-keys.js";

/** Purging idempotency keys (docs/api.md, "Events": honoured for 24 h), against the test database. */
describe("purgeIdempotencyKeys", () => {
  let pool: pg.Pool;
  beforeAll(() => {
    pool = createPool(process.env.TEST_DATABASE_URL ?? "postgresql://postgres@127.0.0.1:5432/webhooks_test", 2);
  });
  afterAll(() => pool.end());

  test("removes keys older than 24 h, in batches, and keeps the newer ones", async () => {
    // An account id of its own (the table has no foreign keys), so that only this test's rows are counted.
    const accountId = `acct_purge_${randomUUID()}`;
    const now = new Date();
    const hoursAgo = (h: number) => new Date(now.getTime() - h * 3_600_000);
    const ages = { "old-1": 25, "old-2": 24.01, "old-3": 48, "old-4": 24 * 30, "old-5": 25, "new-1": 23.99, "new-2": 1, "new-3": 0 };
    for (const [key, age] of Object.entries(ages)) {
      await pool.query("INSERT INTO idempotency_keys (account_id, key, request_hash, event_id, created_at) VALUES ($1, $2, 'h', $3, $4)", [
        accountId,
        key,
        `evt_${key}`,
        hoursAgo(age),
      ]);
    }
    // Batches of 2: the old keys of this test (5) and of any other take several statements.
    const purged = await purgeIdempotencyKeys(pool, 2, now);
    expect(purged).toBeGreaterThanOrEqual(5);
    const { rows } = await pool.query<{ key: string }>("SELECT key FROM idempotency_keys WHERE account_id = $1 ORDER BY key", [accountId]);
    expect(rows.map((r) => r.key)).toEqual(["new-1", "new-2", "new-3"]);
  });
});

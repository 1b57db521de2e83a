import { randomUUID } from "node:crypto";
import { createPool } from "@mailhooks/db";
import { vacuumQueueTables } from "./outbox.js";

/**
 * The queue tables' VACUUM (vacuumQueueTables) against the test database: what it is for is that
 * the relay's looks at a webhook's rows stop walking the index entries its relayed rows left.
 * Other test files share the database, and a transaction of theirs that was open before the
 * rows went keeps a VACUUM from removing them: the test vacuums until they are gone.
 */
const pool = createPool(process.env.TEST_DATABASE_URL ?? "postgresql://postgres@127.0.0.1:5432/webhooks_test", 2);
const prefix = `test-vacuum-${randomUUID()}`;

afterAll(async () => {
  await pool.query("DELETE FROM outbox WHERE queue_prefix = $1", [prefix]);
  await pool.end();
});

/** Index pages read by the look the relay's claim makes for a webhook's oldest waiting row. */
async function pagesReadLookingFor(webhookId: string): Promise<number> {
  const { rows } = await pool.query<{ "QUERY PLAN": [{ Plan: { "Shared Hit Blocks": number; "Shared Read Blocks": number } }] }>(
    `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON)
     SELECT o.id FROM outbox o WHERE o.queue_prefix = '${prefix}' AND o.webhook_id = '${webhookId}' ORDER BY o.id LIMIT 1`,
  );
  const plan = rows[0]["QUERY PLAN"][0].Plan;
  return plan["Shared Hit Blocks"] + plan["Shared Read Blocks"];
}

test("after a VACUUM of the queue tables, a look at a webhook whose 20,000 rows were relayed reads a page or two, not every entry they left", async () => {
  const webhookId = `wh_${randomUUID()}`;
  await pool.query(
    `INSERT INTO outbox (queue_prefix, job_name, job_id, data, webhook_id, account_id)
     SELECT $1, 'delivery', $1 || '-' || g, '{}'::jsonb, $2, 'acct_vacuum' FROM generate_series(1, 20000) g`,
    [prefix, webhookId],
  );
  // Relayed: deleted, as the claim deletes them.
  await pool.query("DELETE FROM outbox WHERE queue_prefix = $1", [prefix]);
  expect(await pagesReadLookingFor(webhookId)).toBeGreaterThan(20);

  const deadline = Date.now() + 30_000;
  let pages = Infinity;
  while (pages > 3 && Date.now() < deadline) {
    await vacuumQueueTables(pool);
    pages = await pagesReadLookingFor(webhookId);
  }
  expect(pages).toBeLessThanOrEqual(3);
}, 60_000);

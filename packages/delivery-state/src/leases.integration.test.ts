import { randomUUID } from "node:crypto";
import { createPool } from "@mailhooks/db";
import { schedulerBacklog } from "./leases.js";

/** The scheduler's leases against the test database; each test has a queue prefix of its own. */
const pool = createPool(process.env.TEST_DATABASE_URL ?? "postgresql://postgres@127.0.0.1:5432/webhooks_test", 2);
const prefix = `test-leases-${randomUUID()}`;

afterAll(async () => {
  await pool.query("DELETE FROM webhook_leases WHERE queue_prefix = $1", [prefix]);
  await pool.end();
});

async function lease(webhookId: string, count: number): Promise<void> {
  await pool.query(
    `INSERT INTO webhook_leases (work_id, queue_prefix, webhook_id, account_id, job_name)
     SELECT $1 || '-' || $2 || '-' || g, $1, $2, 'acct_leases', 'deliver-destination' FROM generate_series(1, $3::int) g`,
    [prefix, webhookId, count],
  );
}

test("a webhook is at its limit by its own job limit: a fast one's is 64 times the limit, unless it is slow too", async () => {
  await lease("wh_fast", 200); // over the default 16, under a fast webhook's 1,024
  await lease("wh_fast_then_slow", 16); // marked fast, then slow: the limit again
  await lease("wh_slow", 16);
  await lease("wh_slow_under", 10);
  await lease("wh_plain", 16);
  await lease("wh_quiet", 3);
  const classes = { slow: ["wh_slow", "wh_slow_under", "wh_fast_then_slow"], fast: ["wh_fast", "wh_fast_then_slow"] };
  expect(await schedulerBacklog(pool, prefix, 16, classes)).toEqual({ waiting: 0, webhooksAtLimit: 3 });
  // Without the marks, every webhook has the limit.
  expect(await schedulerBacklog(pool, prefix, 16)).toEqual({ waiting: 0, webhooksAtLimit: 4 });
  expect(await schedulerBacklog(pool, prefix, 3)).toEqual({ waiting: 0, webhooksAtLimit: 6 });
});

import { randomUUID } from "node:crypto";
import { createPool } from "@mailhooks/db";
import { claimStatement } from "./outbox.js";

/**
 * The relay's fair claim (claimStatement), EXPLAINed against the test database with a backlog
 * waiting: a pass that takes one row must read a few dozen pages, whatever waits behind it. The
 * statement runs (EXPLAIN ANALYZE) in a transaction that is rolled back.
 *
 * Until 2026-11-27 the claim deleted its rows by a join that PostgreSQL ran as a hash of the whole
 * outbox (every waiting row, on every pass), and counted each webhook's leases twice.
 */
const pool = createPool(process.env.TEST_DATABASE_URL ?? "postgresql://postgres@127.0.0.1:5432/webhooks_test", 2);
const prefix = `test-claim-${randomUUID()}`;
const webhookId = `wh_claim_${randomUUID()}`;
const JOB_LIMIT = 16;

interface PlanNode {
  "Node Type": string;
  "Relation Name"?: string;
  "Shared Hit Blocks": number;
  "Shared Read Blocks": number;
  Plans?: PlanNode[];
}

const nodes = (plan: PlanNode): PlanNode[] => [plan, ...(plan.Plans ?? []).flatMap(nodes)];

beforeAll(async () => {
  await pool.query(
    `INSERT INTO outbox (queue_prefix, job_name, job_id, data, webhook_id, account_id)
     SELECT $1, 'delivery', $1 || '-' || g, '{}'::jsonb, $2, 'acct_claim' FROM generate_series(1, 20000) g`,
    [prefix, webhookId],
  );
  // One lease short of the job limit: the pass may take one row.
  await pool.query(
    `INSERT INTO webhook_leases (work_id, queue_prefix, webhook_id, account_id, job_name)
     SELECT $1 || '-leased-' || g, $1, $2, 'acct_claim', 'delivery' FROM generate_series(1, ${JOB_LIMIT - 1}) g`,
    [prefix, webhookId],
  );
});

afterAll(async () => {
  await pool.query("DELETE FROM outbox WHERE queue_prefix = $1", [prefix]);
  await pool.query("DELETE FROM webhook_leases WHERE queue_prefix = $1", [prefix]);
  await pool.end();
});

test("a pass that takes one row of 20,000 waiting reads a few dozen pages, and counts the webhook's leases once", async () => {
  const client = await pool.connect();
  let plan: PlanNode;
  try {
    await client.query("BEGIN");
    const claim = claimStatement(prefix, 500, JOB_LIMIT, { slow: [], fast: [] });
    const { rows } = await client.query<{ "QUERY PLAN": [{ Plan: PlanNode }] }>(
      `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ${claim.text}`,
      claim.values,
    );
    plan = rows[0]["QUERY PLAN"][0].Plan;
  } finally {
    await client.query("ROLLBACK");
    client.release();
  }
  const all = nodes(plan);
  expect(all.filter((n) => n["Node Type"] === "Seq Scan" && n["Relation Name"] === "outbox")).toEqual([]);
  const leaseScans = all.filter((n) => n["Node Type"].includes("Scan") && n["Relation Name"] === "webhook_leases");
  expect(leaseScans).toHaveLength(1);
  expect(plan["Shared Hit Blocks"] + plan["Shared Read Blocks"]).toBeLessThan(200);
});

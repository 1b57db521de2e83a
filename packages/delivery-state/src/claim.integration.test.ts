import { randomUUID } from "node:crypto";
import { createPool } from "@mailhooks/db";
import type { Grant } from "@mailhooks/scheduler";
import type pg from "pg";
import sql from "sql-template-tag";
import { claimWork, prepareStatement, takeStatement, type ClaimOptions } from "./claim.js";
import { run } from "./db.js";

/**
 * The claim against PostgreSQL (docs/scheduler.md, "What holds"): a pass costs what it takes,
 * with 2,000 webhooks of 5 waiting rows each. The plans are read with EXPLAIN (ANALYZE, BUFFERS):
 * the rows locked are exactly the rows taken, and what a pass reads is bounded by the slots and
 * the leases, not by the webhooks that wait. Also: leases expire and are claimed again, and the
 * limits are the deployment's.
 */
const databaseUrl = process.env.TEST_DATABASE_URL ?? "postgresql://postgres@127.0.0.1:5432/webhooks_test";
const WEBHOOKS = 2_000;
const ROWS_EACH = 5;

interface PlanNode {
  "Node Type": string;
  "Relation Name"?: string;
  "Actual Rows": number;
  "Actual Loops": number;
  "Shared Hit Blocks": number;
  "Shared Read Blocks": number;
  Plans?: PlanNode[];
}

function nodes(plan: PlanNode): PlanNode[] {
  return [plan, ...(plan.Plans ?? []).flatMap(nodes)];
}

/** EXPLAIN (ANALYZE, BUFFERS) of `query`, run in a transaction that is rolled back. */
async function explain(pool: pg.Pool, query: ReturnType<typeof sql>): Promise<PlanNode> {
  const client = await pool.connect();
  try {
    await client.query("BEGIN");
    const { rows } = await client.query<{ "QUERY PLAN": [{ Plan: PlanNode }] }>(
      `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ${query.text}`,
      query.values,
    );
    return rows[0]["QUERY PLAN"][0].Plan;
  } finally {
    await client.query("ROLLBACK");
    client.release();
  }
}

const blocks = (plan: PlanNode) => plan["Shared Hit Blocks"] + plan["Shared Read Blocks"];

describe("the claim", () => {
  const pool = createPool(databaseUrl, 4);
  const prefix = `claim-${randomUUID()}`;
  const options = (more: Partial<ClaimOptions> = {}): ClaimOptions => ({
    queuePrefix: prefix,
    notified: [],
    rediscover: false,
    visibilityTimeoutMs: 60_000,
    lockTimeoutMs: 5_000,
    ...more,
  });
  let webhookIds: string[] = [];

  beforeAll(async () => {
    const accountId = `acc_${randomUUID()}`;
    await run(pool, sql`INSERT INTO accounts (id, name) VALUES (${accountId}, ${accountId})`);
    webhookIds = Array.from({ length: WEBHOOKS }, (_, i) => `wh_claim_${prefix}_${String(i).padStart(5, "0")}`);
    await run(
      pool,
      sql`INSERT INTO webhooks (id, account_id, url, events, secret)
          SELECT id, ${accountId}, 'https://127.0.0.1/claim', ARRAY['message.sent'], 'whsec_x' FROM unnest(${webhookIds}::text[]) AS id`,
    );
    await run(
      pool,
      sql`INSERT INTO work_items (queue_prefix, kind, work_id, webhook_id, account_id, due_at)
          SELECT ${prefix}, 'delivery', w || '_' || n, w, ${accountId}, now() - interval '1 minute'
            FROM unnest(${webhookIds}::text[]) AS w CROSS JOIN generate_series(1, ${ROWS_EACH}) AS n`,
    );
    await run(
      pool,
      sql`INSERT INTO webhook_queues (queue_prefix, webhook_id, account_id, ready_at)
          SELECT ${prefix}, w, ${accountId}, now() - interval '1 minute' FROM unnest(${webhookIds}::text[]) AS w`,
    );
    // A live dispatcher of 64 slots and 8 reserve slots, for every test of this prefix.
    await run(
      pool,
      sql`INSERT INTO dispatchers (id, queue_prefix, slots, reserve, seen_until)
          VALUES (${`d-${prefix}`}, ${prefix}, 64, 8, now() + interval '1 minute')`,
    );
    await pool.query("ANALYZE work_items, webhook_queues");
  });
  afterAll(async () => {
    for (const table of ["work_items", "webhook_queues", "dispatchers"])
      await pool.query(`DELETE FROM ${table} WHERE queue_prefix = $1`, [prefix]);
    await pool.query("DELETE FROM webhooks WHERE id = ANY($1)", [webhookIds]);
    await pool.end();
  });

  test(`with ${WEBHOOKS} webhooks of ${ROWS_EACH} waiting rows: taking 500 locks 500 rows and reads a bounded number of pages`, async () => {
    const grants: Grant[] = webhookIds
      .slice(0, 500)
      .map((webhookId) => ({ webhookId, count: 1, reserved: 0, ready: 0, priority: 1, bypassOnly: false, turnAt: null }));
    const plan = await explain(pool, takeStatement(prefix, { grants, parked: [] }, 60_000));
    const locks = nodes(plan).filter((n) => n["Node Type"] === "LockRows");
    const locked = locks.reduce((sum, n) => sum + n["Actual Rows"] * n["Actual Loops"], 0);
    expect(locked).toBe(500);
    expect(nodes(plan).some((n) => n["Node Type"] === "Seq Scan" && n["Relation Name"] === "work_items")).toBe(false);
    // Each webhook: an index descent to its first waiting row (3 or 4 pages), that row, and its
    // update (a new row version and its entries in three indexes), then its next waiting row and
    // its place in the round (an update of its webhook_queues row): about 30 pages a row taken.
    expect(blocks(plan)).toBeLessThan(500 * 40);
  });

  test("the first statement reads the round's first webhooks, as many as the slots and leases allow, whatever waits behind them", async () => {
    const plan = await explain(pool, prepareStatement(prefix, []));
    // 2,000 webhooks in the round: 136 read (twice the slots, and the reserve), each with its webhook's row.
    expect(blocks(plan)).toBeLessThan(136 * 12);
  });

  test("a claim takes what the slots allow, once: a second claim with every slot leased takes nothing and reads little", async () => {
    const first = await claimWork(pool, options());
    // The reserve first, to 4 webhooks (one account: half of it), then the slots' lane to 64 more, one
    // each (max-min; never answered, each weighs 2 of its 128).
    expect(first.claimed.length).toBe(68);
    // The rest of the round is due and found no room: an attempt's end should start a pass.
    expect(first.waiting).toBe(true);
    expect(new Set(first.claimed.map((c) => c.workId.split("_").slice(0, -1).join("_"))).size).toBe(68);
    const second = await claimWork(pool, options());
    expect(second.claimed).toEqual([]);
    // What such a pass reads: the live leases and the round's first webhooks, never the 2,000.
    const plan = await explain(pool, prepareStatement(prefix, []));
    expect(blocks(plan)).toBeLessThan((68 + 64 + 8) * 12);
  });

  test("an expired lease ends and its work is claimed again, under a new lease", async () => {
    const own = `${prefix}-expiry`;
    const webhookId = webhookIds[0];
    const workId = `expiring-${own}`;
    await run(
      pool,
      sql`WITH i AS (INSERT INTO work_items (queue_prefix, kind, work_id, webhook_id, account_id)
                     VALUES (${own}, 'delivery', ${workId}, ${webhookId}, 'acc') RETURNING 1)
          INSERT INTO dispatchers (id, queue_prefix, slots, reserve, seen_until) VALUES (${`d-${own}`}, ${own}, 1, 0, now() + interval '1 minute')`,
    );
    const first = await claimWork(pool, options({ queuePrefix: own, notified: [webhookId] }));
    expect(first.claimed).toEqual([{ kind: "delivery", workId, lease: 1, reserved: false }]);
    // Nothing else of this deployment is due: an attempt's end need not start a pass.
    expect(first.waiting).toBe(false);
    // Its holder stops renewing it: the visibility timeout passes.
    await run(pool, sql`UPDATE work_items SET leased_until = now() - interval '1 second' WHERE work_id = ${workId}`);
    const second = await claimWork(pool, options({ queuePrefix: own }));
    expect(second.claimed).toEqual([{ kind: "delivery", workId, lease: 2, reserved: false }]);
    const { rows } = await run<{ expirations: number }>(pool, sql`SELECT expirations FROM work_items WHERE work_id = ${workId}`);
    expect(rows[0].expirations).toBe(1);
    for (const table of ["work_items", "webhook_queues", "dispatchers"])
      await pool.query(`DELETE FROM ${table} WHERE queue_prefix = $1`, [own]);
  });

  test("webhooks parked out of a full read of the round leave room at once for a due webhook behind them", async () => {
    const own = `parked-${randomUUID()}`;
    const accountId = `acc_${own}`;
    await run(pool, sql`INSERT INTO accounts (id, name) VALUES (${accountId}, ${accountId})`);
    // Slots 1 and reserve 1: a pass reads two webhooks of the round. Three paused ones come first.
    const hooks = ["p1", "p2", "p3", "enabled"].map((name) => `wh_${own}_${name}`);
    await run(
      pool,
      sql`WITH h AS (
            INSERT INTO webhooks (id, account_id, url, events, secret, status)
            SELECT id, ${accountId}, 'https://127.0.0.1/parked', ARRAY['message.sent'], 'whsec_x',
                   (CASE WHEN id LIKE '%enabled' THEN 'enabled' ELSE 'paused' END)::"WebhookStatus"
              FROM unnest(${hooks}::text[]) AS id RETURNING id
          ), w AS (
            INSERT INTO work_items (queue_prefix, kind, work_id, webhook_id, account_id, due_at)
            SELECT ${own}, 'delivery', id || '_work', id, ${accountId}, now() - interval '1 minute' FROM h RETURNING 1
          ), q AS (
            INSERT INTO webhook_queues (queue_prefix, webhook_id, account_id, ready_at)
            SELECT ${own}, id, ${accountId}, now() - make_interval(mins => 10 - ord::int)
              FROM unnest(${hooks}::text[]) WITH ORDINALITY AS t(id, ord) RETURNING 1
          )
          INSERT INTO dispatchers (id, queue_prefix, slots, reserve, seen_until) VALUES (${`d-${own}`}, ${own}, 1, 1, now() + interval '1 minute')`,
    );
    const first = await claimWork(pool, options({ queuePrefix: own }));
    expect(first.claimed).toEqual([]);
    // The two paused webhooks read are parked; the relay must pass again rather than sleep.
    expect(first.more).toBe(true);
    const second = await claimWork(pool, options({ queuePrefix: own }));
    expect(second.claimed.map((c) => c.workId)).toEqual([`${hooks[3]}_work`]);
    for (const table of ["work_items", "webhook_queues", "dispatchers"])
      await pool.query(`DELETE FROM ${table} WHERE queue_prefix = $1`, [own]);
    await pool.query("DELETE FROM webhooks WHERE id = ANY($1)", [hooks]);
  });

  test("a row of a kind no dispatcher runs cannot be written", async () => {
    await expect(
      run(
        pool,
        sql`INSERT INTO work_items (queue_prefix, kind, work_id, webhook_id, account_id)
            VALUES (${prefix}, 'bogus', ${`bogus-${prefix}`}, ${webhookIds[0]}, 'acc')`,
      ),
    ).rejects.toMatchObject({ code: "23514" });
  });
});

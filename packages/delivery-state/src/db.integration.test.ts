import { createPool } from "@mailhooks/db";
import sql from "sql-template-tag";
import { inTransaction, run } from "./db.js";

/**
 * inTransaction's settings are the transaction's own (SET LOCAL with its BEGIN): the claim's
 * timeouts (lock_timeout, statement_timeout, idle_in_transaction_session_timeout: claimWork) hold
 * for its transaction, and nothing of them is left on the pooled connection.
 */
const databaseUrl = process.env.TEST_DATABASE_URL ?? "postgresql://postgres@127.0.0.1:5432/webhooks_test";

describe("inTransaction settings", () => {
  const pool = createPool(databaseUrl, 1);
  afterAll(() => pool.end());

  const show = (client: { query: (sql: string) => Promise<{ rows: Record<string, string>[] }> }, name: string) =>
    client.query(`SHOW ${name}`).then((r) => r.rows[0][name]);

  test("are set for the transaction alone", async () => {
    const read = (client: Parameters<typeof show>[0]) =>
      Promise.all(["lock_timeout", "statement_timeout", "idle_in_transaction_session_timeout"].map((name) => show(client, name)));
    const before = await read(pool);
    const inside = await inTransaction(pool, read, {
      lock_timeout: 1_500,
      statement_timeout: 1_500,
      idle_in_transaction_session_timeout: 1_500,
    });
    expect(inside).toEqual(["1500ms", "1500ms", "1500ms"]);
    expect(before).not.toEqual(inside);
    // The same pooled connection afterwards: as before.
    expect(await read(pool)).toEqual(before);
  });

  test("a pool made with genericPlans keeps every named statement's generic plan (a startup setting: no round trip of its own); other pools do not", async () => {
    const generic = createPool(databaseUrl, 1, { genericPlans: true });
    try {
      const mode = sql`SELECT current_setting('plan_cache_mode') AS mode, ${1}::int AS one`;
      expect((await run<{ mode: string }>(generic, mode, "test_generic_plans_mode")).rows[0].mode).toBe("force_generic_plan");
      expect(await show(pool, "plan_cache_mode")).toBe("auto");
    } finally {
      await generic.end();
    }
  });
});

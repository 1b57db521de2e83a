import { createPool } from "@mailhooks/db";
import sql from "sql-template-tag";
import { inTransaction, runGeneric } from "./db.js";

/**
 * inTransaction's settings are the transaction's own (SET LOCAL with its BEGIN): the relay's
 * claim commits without waiting for the WAL to reach the disk (synchronous_commit off, see
 * relayOutbox), and nothing of it is left on the pooled connection.
 */
const databaseUrl = process.env.TEST_DATABASE_URL ?? "postgresql://postgres@127.0.0.1:5432/webhooks_test";

describe("inTransaction settings", () => {
  const pool = createPool(databaseUrl, 1);
  afterAll(() => pool.end());

  const show = (client: { query: (sql: string) => Promise<{ rows: Record<string, string>[] }> }, name: string) =>
    client.query(`SHOW ${name}`).then((r) => r.rows[0][name]);

  test("are set for the transaction alone", async () => {
    const read = (client: Parameters<typeof show>[0]) =>
      Promise.all([show(client, "synchronous_commit"), show(client, "statement_timeout")]);
    const before = await read(pool);
    expect(before[0]).toBe("on");
    const inside = await inTransaction(pool, read, { synchronous_commit: "off", statement_timeout: 1_500 });
    expect(inside).toEqual(["off", "1500ms"]);
    // The same pooled connection afterwards: as before.
    expect(await read(pool)).toEqual(before);
  });

  test("runGeneric runs its named statement with the generic plan forced, and leaves the connection as it was", async () => {
    const mode = sql`SELECT current_setting('plan_cache_mode') AS mode, ${1}::int AS one`;
    const { rows } = await runGeneric<{ mode: string }>(pool, mode, "test_run_generic_mode");
    expect(rows[0].mode).toBe("force_generic_plan");
    expect(await show(pool, "plan_cache_mode")).toBe("auto");
  });
});

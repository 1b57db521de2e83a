import { createPool } from "@mailhooks/db";
import sql from "sql-template-tag";
import { inTransaction, inTwoRoundTrips, run } from "./db.js";

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

/**
 * inTwoRoundTrips (the claim's transaction): the BEGIN with its settings, its lock and the first
 * statements in one round trip, the second statement and the COMMIT in the other; every value
 * arrives as it would as a parameter; a failure rolls the whole back.
 */
describe("inTwoRoundTrips", () => {
  const pool = createPool(databaseUrl, 1);
  const sent: string[] = [];
  pool.on("connect", (client) => {
    const query = client.query.bind(client) as (...args: unknown[]) => unknown;
    (client as unknown as { query: (...args: unknown[]) => unknown }).query = (...args: unknown[]) => {
      sent.push(typeof args[0] === "string" ? args[0] : "(a statement of node-postgres)");
      return query(...args);
    };
  });
  afterAll(() => pool.end());
  const lockKey = 4_242_424_242n;

  test("sends its values as parameters would arrive, holds its settings and lock to the end, in two round trips once prepared", async () => {
    const values = {
      text: `it's a "quote" \\ and \u00e9`,
      list: ["a", "b,c", 'd"e', "{f}", null],
      floats: [1.5, null],
      flags: [true, false],
    };
    const run = () =>
      inTwoRoundTrips<
        { text: string; list: (string | null)[]; floats: (number | null)[]; flags: boolean[]; none: number | null },
        { lock: string; held: number }
      >(
        pool,
        { lock_timeout: 1_234, advisory_lock: lockKey },
        [
          {
            name: "test_two_trips_first",
            query: sql`SELECT ${values.text}::text AS text, ${values.list}::text[] AS list, ${values.floats}::float8[] AS floats,
                              ${values.flags}::boolean[] AS flags, ${null}::int AS none`,
          },
        ],
        (rows) => ({
          name: "test_two_trips_second",
          query: sql`SELECT current_setting('lock_timeout') AS lock, (SELECT count(*)::int FROM pg_locks
                       WHERE locktype = 'advisory' AND pid = pg_backend_pid() AND granted) AS held, ${rows[0].text}::text AS echo`,
        }),
      );
    await run();
    sent.length = 0;
    const { first, second } = await run();
    expect(first).toEqual([{ ...values, none: null }]);
    expect(second).toEqual([expect.objectContaining({ lock: "1234ms", held: 1 })]);
    expect(sent).toHaveLength(2);
    expect(sent[0]).toMatch(/^BEGIN; .*pg_advisory_xact_lock.*; EXECUTE test_two_trips_first\(/);
    expect(sent[1]).toMatch(/^EXECUTE test_two_trips_second\(.*\); COMMIT$/s);
  });

  test("rolls the first statement's writes back when the second fails, and prepares again after its statements were dropped", async () => {
    await pool.query("CREATE TEMP TABLE IF NOT EXISTS two_trips (n int)");
    const attempt = (second: string) =>
      inTwoRoundTrips(pool, {}, [{ name: "test_two_trips_insert", query: sql`INSERT INTO two_trips VALUES (${1}) RETURNING n` }], () => ({
        name: second,
        query: second === "test_two_trips_fails" ? sql`SELECT 1 / ${0}::int AS x` : sql`SELECT ${1}::int AS x`,
      }));
    await expect(attempt("test_two_trips_fails")).rejects.toThrow(/division by zero/);
    expect((await pool.query("SELECT count(*)::int AS n FROM two_trips")).rows[0].n).toBe(0);
    // A pooler's reset (DISCARD ALL) drops the prepared statements: the next call fails, the one after prepares them again.
    await pool.query("DEALLOCATE ALL");
    await expect(attempt("test_two_trips_works")).rejects.toMatchObject({ code: "26000" });
    await expect(attempt("test_two_trips_works")).resolves.toMatchObject({ second: [{ x: 1 }] });
    expect((await pool.query("SELECT count(*)::int AS n FROM two_trips")).rows[0].n).toBe(1);
  });
});

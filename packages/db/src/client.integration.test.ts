import { createPool, createPrismaClient, DEFAULT_STATEMENT_TIMEOUT_MS } from "./client.js";

/**
 * Every pool of the service has a statement timeout (issue 17, "DDL never blocks the hot path"):
 * a statement stuck behind a lock gives its connection back instead of holding it for good.
 */
const url = process.env.TEST_DATABASE_URL ?? "postgresql://postgres@127.0.0.1:5432/webhooks_test";

describe("pool settings", () => {
  test("createPool and createPrismaClient set statement_timeout (30 s by default), per connection", async () => {
    expect(DEFAULT_STATEMENT_TIMEOUT_MS).toBe(30_000);
    const pool = createPool(url, 1);
    const prisma = createPrismaClient(url, 1);
    try {
      expect((await pool.query("SHOW statement_timeout")).rows[0].statement_timeout).toBe("30s");
      expect((await prisma.$queryRawUnsafe<{ statement_timeout: string }[]>("SHOW statement_timeout"))[0].statement_timeout).toBe("30s");
    } finally {
      await prisma.$disconnect();
      await pool.end();
    }
  });

  test("a statement past the configured timeout is cancelled (57014) and the pool goes on", async () => {
    const pool = createPool(url, 1, { statementTimeoutMs: 200 });
    try {
      await expect(pool.query("SELECT pg_sleep(5)")).rejects.toMatchObject({ code: "57014" });
      expect((await pool.query("SELECT 1 AS one")).rows[0].one).toBe(1);
    } finally {
      await pool.end();
    }
  });

  test("0 leaves the server's own statement_timeout", async () => {
    const pool = createPool(url, 1, { statementTimeoutMs: 0 });
    try {
      expect((await pool.query("SHOW statement_timeout")).rows[0].statement_timeout).toBe("0");
    } finally {
      await pool.end();
    }
  });
});

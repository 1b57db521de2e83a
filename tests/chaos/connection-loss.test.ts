import { createPool } from "@mailhooks/db";
import { inTransaction } from "@mailhooks/delivery-state";
import { testDatabaseUrl } from "../support/env.js";
import { databaseUrlVia } from "./support/processes.js";
import { startTcpProxy, type TcpProxy } from "./support/tcp-proxy.js";

/**
 * A PostgreSQL connection that dies while a transaction holds it (PostgreSQL restarting, a proxy
 * failing over) makes node-postgres emit 'error' on a client the pool has handed out and no
 * longer listens to: unhandled, that ends the process (a dispatcher's relay died so under load).
 * `inTransaction` listens while it holds a client: the transaction fails, the process lives on,
 * and the pool serves the next transaction on a fresh connection.
 */
describe("a connection lost in the middle of a transaction", () => {
  let proxy: TcpProxy;
  beforeAll(async () => {
    const target = new URL(testDatabaseUrl());
    proxy = await startTcpProxy({ host: target.hostname, port: Number(target.port || 5432) });
  });
  afterAll(() => proxy?.close());

  test("fails that transaction only; nothing is thrown at the process", async () => {
    const pool = createPool(databaseUrlVia(proxy.port), 2);
    const uncaught: unknown[] = [];
    const onUncaught = (error: unknown) => uncaught.push(error);
    process.on("uncaughtException", onUncaught);
    try {
      await expect(
        inTransaction(pool, async (client) => {
          await client.query("SELECT 1");
          proxy.cut();
          await client.query("SELECT pg_sleep(1)");
        }),
      ).rejects.toThrow();
      proxy.restore();
      await new Promise((r) => setTimeout(r, 100)); // bounded: an 'error' event would land by now
      expect(uncaught).toEqual([]);
      // The pool goes on with a new connection.
      expect(await inTransaction(pool, async (client) => (await client.query("SELECT 42 AS n")).rows[0].n)).toBe(42);
    } finally {
      process.removeListener("uncaughtException", onUncaught);
      proxy.restore();
      await pool.end();
    }
  });
});

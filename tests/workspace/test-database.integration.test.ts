import path from "node:path";
import { fileURLToPath } from "node:url";
import pg from "pg";
import { runProcess } from "@mailhooks/processes";
import { testDatabaseUrl } from "../support/env.js";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");

/**
 * `npm test` makes a database of its own per run (docs/operations.md, "Commands"): a second run on the same
 * machine (a developer's beside CI's, or a helper's) must not drop the database this run is
 * using, and the databases of killed runs must not pile up. It once dropped and recreated one shared `webhooks_test`, which emptied a running
 * suite's tables under it (the browser test lost its replays mid-way).
 */
describe("npm test's database", () => {
  it("a second run leaves this run's database alone, drops a killed run's, and drops its own at the end", async () => {
    const pool = new pg.Pool({ connectionString: testDatabaseUrl(), max: 1 });
    // A run killed before its end: its process is gone, its database stayed.
    const { pid: killed } = await runProcess(process.execPath, ["-e", ""]);
    const leftover = `webhooks_test_${killed}`;
    try {
      await pool.query("CREATE TABLE IF NOT EXISTS test_database_marker (id int)");
      await pool.query("INSERT INTO test_database_marker VALUES (1)");
      await pool.query(`CREATE DATABASE "${leftover}"`);

      // Another run, as a person starts it: no TEST_DATABASE_URL. `--listTests` prepares
      // everything (certificate, database), lists the files and ends without running them.
      const other = await runProcess(process.execPath, [path.join(ROOT, "scripts/test.mjs"), "--listTests"], {
        cwd: ROOT,
        env: { TEST_DATABASE_URL: undefined },
        timeoutMs: 120_000,
      });
      expect({ status: other.code, stderr: other.code === 0 ? "" : other.stderr }).toEqual({ status: 0, stderr: "" });

      expect((await pool.query("SELECT count(*)::int AS n FROM test_database_marker")).rows[0].n).toBe(1);
      const leftovers = await pool.query("SELECT datname FROM pg_database WHERE datname = ANY($1)", [
        [`webhooks_test_${other.pid}`, leftover],
      ]);
      expect(leftovers.rows).toEqual([]);
    } finally {
      await pool.query("DROP TABLE IF EXISTS test_database_marker").catch(() => undefined);
      await pool.query(`DROP DATABASE IF EXISTS "${leftover}"`).catch(() => undefined);
      await pool.end();
    }
  });
});

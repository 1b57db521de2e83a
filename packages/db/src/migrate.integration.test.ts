import { randomUUID } from "node:crypto";
import { readFile } from "node:fs/promises";
import path from "node:path";
import pg from "pg";
import { migrate, migrationChecksum, MIGRATIONS_DIR } from "./migrate.js";

const base = process.env.TEST_DATABASE_URL ?? "postgresql://postgres@127.0.0.1:5432/webhooks_test";

/**
 * `npm run db:migrate` on a database that applied migrations before: a migration whose file
 * differs from what was applied stops it, but for the versions an unreleased build applied
 * (ALSO_APPLIED_AS in migrate.ts).
 */
describe("migrate on a migrated database", () => {
  const url = new URL(base);
  url.pathname = `/migrate_${randomUUID().replace(/-/g, "").slice(0, 12)}`;
  const databaseUrl = url.toString();
  const setChecksum = async (name: string, checksum: string) => {
    const client = new pg.Client({ connectionString: databaseUrl });
    await client.connect();
    try {
      await client.query(`UPDATE "_prisma_migrations" SET checksum = $2 WHERE migration_name = $1`, [name, checksum]);
    } finally {
      await client.end();
    }
  };

  beforeAll(async () => {
    await migrate(databaseUrl, MIGRATIONS_DIR);
  }, 60_000);
  afterAll(async () => {
    const admin = new pg.Client({ connectionString: base });
    await admin.connect();
    await admin.query(`DROP DATABASE IF EXISTS "${url.pathname.slice(1)}"`);
    await admin.end();
  });

  test("a migration changed since it was applied stops it", async () => {
    await setChecksum("20261129010000_run_unattended", "0".repeat(64));
    await expect(migrate(databaseUrl, MIGRATIONS_DIR)).rejects.toThrow(
      "migration 20261129010000_run_unattended was modified after it was applied",
    );
  });

  test("the work queue's migration as an unreleased build applied it is accepted", async () => {
    const released = await readFile(path.join(MIGRATIONS_DIR, "20261129010000_run_unattended", "migration.sql"), "utf8");
    await setChecksum("20261129010000_run_unattended", migrationChecksum(released));
    await setChecksum("20261129000000_work_queue", "293f62da2c155ff2d6cf1e227a5f208b6b1ceea44e4ee35c0e829b20cda35252");
    const result = await migrate(databaseUrl, MIGRATIONS_DIR);
    expect(result.applied).toEqual([]);
  });
});

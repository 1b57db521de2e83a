import { createHash, randomUUID } from "node:crypto";
import { readFile, readdir } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import pg from "pg";

/**
 * Applies the SQL migrations under `prisma/migrations` (Prisma's own layout:
 * `<timestamp>_<name>/migration.sql`) without Prisma's native schema engine, keeping the same
 * `_prisma_migrations` bookkeeping as `prisma migrate deploy`, so either tool can take over.
 * Creates the database first when it does not exist. Safe to run concurrently: a PostgreSQL
 * advisory lock (the one Prisma takes) serializes runs.
 */

/** Prisma Migrate's advisory lock key. */
const PRISMA_LOCK_KEY = 72707369;

export interface MigrationResult {
  applied: string[];
  alreadyApplied: string[];
}

/** Creates the database named in `databaseUrl` when missing. */
export async function ensureDatabase(databaseUrl: string): Promise<void> {
  const url = new URL(databaseUrl);
  const name = decodeURIComponent(url.pathname.slice(1));
  if (!name) throw new Error("DATABASE_URL names no database");
  url.pathname = "/postgres";
  const client = new pg.Client({ connectionString: url.toString() });
  await client.connect();
  try {
    const found = await client.query("SELECT 1 FROM pg_database WHERE datname = $1", [name]);
    if (found.rowCount === 0) {
      try {
        await client.query(`CREATE DATABASE "${name.replaceAll('"', '""')}"`);
      } catch (error) {
        // 42P04: created meanwhile by a concurrent run.
        if ((error as { code?: string }).code !== "42P04") throw error;
      }
    }
  } finally {
    await client.end();
  }
}

/**
 * Other checksums a migration is accepted under: those of versions of its file that unreleased
 * builds applied before the file was set back to its released text. `20261129000000_work_queue`
 * was so applied with the queue's times in microseconds, which `20261129040000_queue_times_microseconds`
 * now gives every database (a no-op where they have them already).
 */
const ALSO_APPLIED_AS: Readonly<Record<string, readonly string[]>> = {
  "20261129000000_work_queue": ["293f62da2c155ff2d6cf1e227a5f208b6b1ceea44e4ee35c0e829b20cda35252"],
};

/** sha256 hex of the script, as Prisma records it in `_prisma_migrations.checksum`. */
export function migrationChecksum(script: string): string {
  return createHash("sha256").update(script, "utf8").digest("hex");
}

/** Migration folder names, in the order they are applied. */
export async function listMigrations(migrationsDir: string): Promise<string[]> {
  const entries = await readdir(migrationsDir, { withFileTypes: true });
  return entries
    .filter((e) => e.isDirectory())
    .map((e) => e.name)
    .sort();
}

/**
 * Applies every migration not yet recorded as finished, each in its own transaction.
 * @throws when a recorded migration's checksum differs from its file (the file was edited after
 *   it was applied) or when a migration fails; a failed migration leaves no trace.
 */
export async function migrate(databaseUrl: string, migrationsDir: string): Promise<MigrationResult> {
  await ensureDatabase(databaseUrl);
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    await client.query("SELECT pg_advisory_lock($1)", [PRISMA_LOCK_KEY]);
    await client.query(`CREATE TABLE IF NOT EXISTS "_prisma_migrations" (
      "id" VARCHAR(36) PRIMARY KEY NOT NULL,
      "checksum" VARCHAR(64) NOT NULL,
      "finished_at" TIMESTAMPTZ,
      "migration_name" VARCHAR(255) NOT NULL,
      "logs" TEXT,
      "rolled_back_at" TIMESTAMPTZ,
      "started_at" TIMESTAMPTZ NOT NULL DEFAULT now(),
      "applied_steps_count" INTEGER NOT NULL DEFAULT 0
    )`);
    const done = await client.query<{ migration_name: string; checksum: string }>(
      `SELECT migration_name, checksum FROM "_prisma_migrations" WHERE finished_at IS NOT NULL AND rolled_back_at IS NULL`,
    );
    const applied = new Map(done.rows.map((r) => [r.migration_name, r.checksum]));
    const result: MigrationResult = { applied: [], alreadyApplied: [] };
    for (const name of await listMigrations(migrationsDir)) {
      const script = await readFile(path.join(migrationsDir, name, "migration.sql"), "utf8");
      const checksum = migrationChecksum(script);
      const recorded = applied.get(name);
      if (recorded !== undefined) {
        if (recorded !== checksum && !ALSO_APPLIED_AS[name]?.includes(recorded))
          throw new Error(`migration ${name} was modified after it was applied`);
        result.alreadyApplied.push(name);
        continue;
      }
      await client.query("BEGIN");
      try {
        await client.query(script);
        await client.query(
          `INSERT INTO "_prisma_migrations" (id, checksum, finished_at, migration_name, started_at, applied_steps_count)
           VALUES ($1, $2, now(), $3, now(), 1)`,
          [randomUUID(), checksum, name],
        );
        await client.query("COMMIT");
      } catch (error) {
        await client.query("ROLLBACK");
        throw new Error(`migration ${name} failed: ${(error as Error).message}`);
      }
      result.applied.push(name);
    }
    return result;
  } finally {
    await client.query("SELECT pg_advisory_unlock($1)", [PRISMA_LOCK_KEY]).catch(() => undefined);
    await client.end();
  }
}

/**
 * Absolute path of the repository's `prisma/migrations` (same depth from src/ and dist/).
 * fileURLToPath, not URL.pathname: the latter keeps %-escapes (a space is `%20`) and is wrong on Windows.
 */
export const MIGRATIONS_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../../prisma/migrations");

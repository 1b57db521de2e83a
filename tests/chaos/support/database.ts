import pg from "pg";
import { MIGRATIONS_DIR, migrate } from "@mailhooks/db";
import { testDatabaseUrl } from "../../support/env.js";

/**
 * A database of its own for one test file, next to the test database (`<test db>_<suffix>`),
 * freshly migrated. For tests whose effects or reads are the whole database's (retention's
 * partitions, its statistics), so that other test files running at the same time cannot see or be
 * seen by them.
 */
export interface ScratchDatabase {
  url: string;
  drop: () => Promise<void>;
}

function adminUrl(url: URL): string {
  const admin = new URL(url.toString());
  admin.pathname = "/postgres";
  return admin.toString();
}

async function dropDatabase(url: URL): Promise<void> {
  const name = decodeURIComponent(url.pathname.slice(1));
  const client = new pg.Client({ connectionString: adminUrl(url) });
  await client.connect();
  try {
    await client.query(`DROP DATABASE IF EXISTS "${name.replaceAll('"', '""')}" WITH (FORCE)`);
  } finally {
    await client.end();
  }
}

export async function scratchDatabase(suffix: string): Promise<ScratchDatabase> {
  const url = new URL(testDatabaseUrl());
  url.pathname = `/${decodeURIComponent(url.pathname.slice(1))}_${suffix}`;
  await dropDatabase(url);
  await migrate(url.toString(), MIGRATIONS_DIR);
  return { url: url.toString(), drop: () => dropDatabase(url) };
}

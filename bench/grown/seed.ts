/**
 * `--grown`: the seeded database webhooks_bench_grown (see seed-sql.ts for what it holds). Seeded
 * once and reused while its marker (table bench_seed) says it was seeded with the same number of
 * events and the same migrations; otherwise (or with --reseed) dropped and seeded again.
 *
 * Seeding is bulk work done by PostgreSQL: the tables' secondary indexes are dropped and made
 * again afterwards (their definitions read from pg_indexes, so whatever the migrations say), rows
 * are inserted in time order in chunks with synchronous_commit off and, for a superuser,
 * session_replication_role = replica (no foreign-key or notification triggers), then VACUUM
 * ANALYZE leaves the tables as autovacuum would (statistics, visibility map).
 */
import pg from "pg";
import { listMigrations, migrate, MIGRATIONS_DIR } from "@mailhooks/db";
import { log } from "../processes.js";
import * as seedSql from "./seed-sql.js";

export interface SeedReport {
  reused: boolean;
  seededAt: string;
  seedSeconds: number;
  databaseGb: number;
  /** The retention fixture: the UTC day whose payloads the timed purge removes. */
  expiredDay: string;
  rows: { events: number; expiredEvents: number; destinations: number; deliveries: number; auditEntries: number };
}

const TABLES = ["events", "destinations", "deliveries", "replays", "audit_entries", "event_payloads"];
/** Bumped whenever seed-sql.ts changes what it makes: a marker of another version reseeds. */
const SEED_VERSION = 2;
/** Rows of the main series per INSERT (one transaction each). */
const CHUNK = 500_000;
/** Events of the retention fixture's day per seeded event: 1 million for the default 5 million,
 * "the daily purge of 1 million expired payloads". */
export const expiredEventsFor = (events: number) => Math.round(events / 5);
/** EVENT_RETENTION_DAYS as the bench runs it (the default). */
export const RETENTION_DAYS = 90;

type Marker = SeedReport & { version: number; migrations: string[]; events: number; expired: number };

async function readMarker(client: pg.Client): Promise<Marker | null> {
  const { rows } = await client.query(`SELECT to_regclass('bench_seed') IS NOT NULL AS present`);
  if (!rows[0].present) return null;
  const marker = await client.query(`SELECT report FROM bench_seed WHERE id = 1`);
  return marker.rows[0]?.report ?? null;
}

async function databaseGb(client: pg.Client): Promise<number> {
  const { rows } = await client.query<{ bytes: string }>(`SELECT pg_database_size(current_database()) AS bytes`);
  return Number(rows[0].bytes) / 2 ** 30;
}

/** Drops the database `databaseUrl` names, connections and all (FORCE); none: nothing happens. */
export async function dropDatabase(databaseUrl: string): Promise<void> {
  const admin = new URL(databaseUrl);
  const name = admin.pathname.slice(1);
  admin.pathname = "/postgres";
  const client = new pg.Client({ connectionString: admin.toString() });
  await client.connect();
  await client.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
  await client.end();
}

export async function prepareGrownDatabase(databaseUrl: string, options: { events: number; reseed: boolean }): Promise<SeedReport> {
  const migrations = await listMigrations(MIGRATIONS_DIR);
  if (!options.reseed) {
    const client = new pg.Client({ connectionString: databaseUrl });
    const marker = await client.connect().then(
      () => readMarker(client),
      () => null,
    );
    if (
      marker &&
      marker.version === SEED_VERSION &&
      marker.events === options.events &&
      marker.expired === expiredEventsFor(options.events) &&
      marker.migrations.join() === migrations.join()
    ) {
      const gb = await databaseGb(client);
      await client.end();
      log(`reusing the grown database seeded at ${marker.seededAt} (${gb.toFixed(1)} GB)`);
      return { ...marker, reused: true, databaseGb: gb };
    }
    await client.end().catch(() => undefined);
    if (marker) log("the grown database was seeded by another version of the seed, with other sizes or other migrations: seeding it again");
  }
  return seed(databaseUrl, options.events, migrations);
}

async function seed(databaseUrl: string, events: number, migrations: string[]): Promise<SeedReport> {
  const started = Date.now();
  const expired = expiredEventsFor(events);
  log(`seeding ${events} events (+ ${expired} expired) into a new database; this takes minutes`);
  await dropDatabase(databaseUrl);
  await migrate(databaseUrl, MIGRATIONS_DIR);
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  const step = async (what: string, sql: string) => {
    const t = Date.now();
    await client.query(sql);
    log(`  ${what} (${((Date.now() - t) / 1000).toFixed(1)} s)`);
  };
  await client.query(
    `SET synchronous_commit = off; SET maintenance_work_mem = '1GB'; SET work_mem = '64MB'; SET max_parallel_maintenance_workers = 2`,
  );
  await client
    .query(`SET session_replication_role = replica`)
    .catch(() => log("  not a superuser: foreign keys are checked row by row (slower)"));

  // Secondary indexes (not those behind a constraint) are dropped now and made again at the end.
  const { rows: indexes } = await client.query<{ name: string; def: string }>(
    `SELECT i.indexname AS name, i.indexdef AS def FROM pg_indexes i
      WHERE i.schemaname = 'public' AND i.tablename = ANY($1)
        AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = (quote_ident(i.schemaname) || '.' || quote_ident(i.indexname))::regclass)`,
    [TABLES],
  );
  for (const index of indexes) await client.query(`DROP INDEX "${index.name}"`);

  const { rows: dayRows } = await client.query<{ day: string }>(
    `SELECT to_char((now() AT TIME ZONE 'UTC')::date - ${RETENTION_DAYS + 2}, 'YYYY-MM-DD') AS day`,
  );
  const expiredDay = dayRows[0].day;
  const dayStart = `('${expiredDay}'::date::timestamp AT TIME ZONE 'UTC')`;
  await step("payload partitions", `SELECT ensure_event_payload_partitions('${expiredDay}'::date, (now() AT TIME ZONE 'UTC')::date + 15)`);
  await step("accounts and webhooks", seedSql.accountsAndWebhooks());

  const series = async (
    total: number,
    start: string,
    span: string,
    tag: string,
    two: boolean,
    auditEvery: number,
    withPayloads: boolean,
  ) => {
    for (let from = 0; from < total; from += CHUNK) {
      const to = Math.min(total, from + CHUNK);
      const t = Date.now();
      await client.query(seedSql.seriesTable(from, to, total, start, span, tag));
      await client.query(seedSql.events());
      if (withPayloads) await client.query(seedSql.payloads());
      await client.query(seedSql.destinationsAndDeliveries(two));
      await client.query(seedSql.auditEntries(auditEvery));
      log(
        `  ${tag === "x" ? "expired day" : "events"} ${to} of ${total} (${((to - from) / ((Date.now() - t) / 1000)).toFixed(0)} events/s with their rows)`,
      );
    }
  };
  // The expired day first, then the 80 days: ids and times grow together, as in production. The
  // expired day's payloads are left to purge.ts, which puts them in just before it times the
  // purge (the dispatcher's own retention job would drop them as soon as it starts).
  await series(expired, dayStart, "interval '1 day' - interval '1 second'", "x", false, 1_000, false);
  await series(
    events,
    `now() - interval '${seedSql.SEED_DAYS} days'`,
    `interval '${seedSql.SEED_DAYS} days' - interval '1 minute'`,
    "m",
    true,
    50,
    true,
  );
  await client.query(`DROP TABLE IF EXISTS seed_rows`);

  for (const index of indexes) await step(`index ${index.name}`, index.def);
  await step("VACUUM ANALYZE", `VACUUM (ANALYZE) ${TABLES.join(", ")}, accounts, webhooks`);
  await client.query(`SET session_replication_role = DEFAULT`).catch(() => undefined);

  const count = async (table: string) => Number((await client.query(`SELECT count(*) AS n FROM ${table}`)).rows[0].n);
  const report: Marker = {
    reused: false,
    seededAt: new Date().toISOString(),
    seedSeconds: Math.round((Date.now() - started) / 1000),
    databaseGb: await databaseGb(client),
    expiredDay,
    rows: {
      events: await count("events"),
      expiredEvents: expired,
      destinations: await count("destinations"),
      deliveries: await count("deliveries"),
      auditEntries: await count("audit_entries"),
    },
    version: SEED_VERSION,
    migrations,
    events,
    expired,
  };
  await client.query(`CREATE TABLE bench_seed (id integer PRIMARY KEY, report jsonb NOT NULL)`);
  await client.query(`INSERT INTO bench_seed (id, report) VALUES (1, $1)`, [report]);
  await client.end();
  log(`seeded in ${report.seedSeconds} s: ${report.databaseGb.toFixed(1)} GB`);
  return report;
}

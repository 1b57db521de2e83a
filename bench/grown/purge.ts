/**
 * The daily retention purge, timed on the grown database: the maintenance job's own function
 * (`purgeExpiredPayloads` of @mailhooks/delivery-state, which the dispatcher's retention job
 * calls) run once against the retention fixture, a UTC day older than EVENT_RETENTION_DAYS
 * holding one million payloads. Before it, the fixture's payloads are written (not timed: the
 * seed leaves them out, and the dispatcher's own retention job or an earlier run would have
 * dropped them anyway); after it, the bench checks
 * that the payloads are gone and that the events of that day, their deliveries and their audit
 * entries are all still there (spec "Event record").
 */
import pg from "pg";
import { createPool } from "@mailhooks/db";
import { purgeExpiredPayloads } from "@mailhooks/delivery-state";
import { log } from "../processes.js";
import { RETENTION_DAYS, type SeedReport } from "./seed.js";

export interface PurgeReport {
  method: string;
  /** Payloads of the fixture day before the purge, and after it. */
  payloads: number;
  payloadsLeft: number;
  purgeMs: number;
  /** Events, deliveries and audit entries of the fixture day, before and after. */
  metadataBefore: { events: number; deliveries: number; auditEntries: number };
  metadataKept: boolean;
}

/** An envelope rebuilt from an event row (the seed's shape, not its exact bytes). */
const payloadOf = (e: string) =>
  `'{"event":"' || ${e}.event_type || '","timestamp":' || extract(epoch from ${e}.created_at)::bigint || ',"data":{"messageId":"' || ${e}.message_id || '","threadId":"' || ${e}.thread_id || '","inboxId":"' || ${e}.inbox_id || '","from":"Seed Sender <sender@seed.example>","to":["recipient@example.com"],"subject":"Your order has shipped","status":"sent"}}'`;

export async function timeRetentionPurge(databaseUrl: string, seed: SeedReport): Promise<PurgeReport> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  const day = `('${seed.expiredDay}'::date::timestamp AT TIME ZONE 'UTC')`;
  const inDay = (column: string) => `${column} >= ${day} AND ${column} < ${day} + interval '1 day'`;
  const count = async (sql: string) => Number((await client.query(sql)).rows[0].n);
  const countPayloads = () => count(`SELECT count(*) AS n FROM event_payloads WHERE ${inDay("created_at")}`);
  const metadata = async () => ({
    events: await count(`SELECT count(*) AS n FROM events WHERE ${inDay("created_at")}`),
    deliveries: await count(`SELECT count(*) AS n FROM deliveries WHERE ${inDay("created_at")}`),
    auditEntries: await count(
      `SELECT count(*) AS n FROM audit_entries a JOIN events e ON e.id = a.event_id WHERE ${inDay("e.created_at")}`,
    ),
  });

  if ((await countPayloads()) === 0) {
    log("writing the expired day's payloads (not timed)");
    await client.query(`SELECT ensure_event_payload_partitions('${seed.expiredDay}'::date, '${seed.expiredDay}'::date + 1)`);
    await client.query(
      `INSERT INTO event_payloads (event_id, created_at, payload) SELECT e.id, e.created_at, ${payloadOf("e")} FROM events e WHERE ${inDay("e.created_at")}`,
    );
    await client.query(`VACUUM (ANALYZE) event_payloads`);
  }
  const payloads = await countPayloads();
  const metadataBefore = await metadata();

  log(`timing the retention purge of ${payloads} payloads`);
  const pool = createPool(databaseUrl, 2);
  await pool.query("SELECT 1");
  const t0 = performance.now();
  const result = await purgeExpiredPayloads(pool, RETENTION_DAYS);
  const purgeMs = performance.now() - t0;
  await pool.end();
  const payloadsLeft = await countPayloads();
  const after = await metadata();
  await client.end();
  return {
    method: `purgeExpiredPayloads (@mailhooks/delivery-state) with EVENT_RETENTION_DAYS=${RETENTION_DAYS}: dropped ${result.droppedPartitions.join(", ") || "no partition"}`,
    payloads,
    payloadsLeft,
    purgeMs,
    metadataBefore,
    metadataKept:
      after.events === metadataBefore.events &&
      after.deliveries === metadataBefore.deliveries &&
      after.auditEntries === metadataBefore.auditEntries,
  };
}

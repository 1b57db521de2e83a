import type pg from "pg";
import sql, { raw } from "sql-template-tag";
import { run, type Queryable } from "./db.js";

/**
 * Payload retention (spec "Event record": the body is retained for 90 days; CONTRACT.md
 * section 5). Payloads live in `event_payloads`, partitioned by the UTC day of the event's
 * `created_at`: expiry drops whole partitions, which costs the same for a thousand payloads as
 * for a million, and touches no event, delivery or audit row. `retention_state` keeps the horizon
 * below which every payload is gone; reads decide `payload_retained` from it.
 */

const DAY_MS = 86_400_000;
/** Partitions made ahead of today, so that ingest never meets a missing one. */
export const PARTITION_DAYS_AHEAD = 14;

const utcDay = (at: Date) => new Date(Math.floor(at.getTime() / DAY_MS) * DAY_MS);
const isoDay = (at: Date) => at.toISOString().slice(0, 10);

/**
 * When the payload of an event created at `createdAt` goes: payloads go by whole UTC days, so at
 * the end of its day plus `retentionDays` (purgeExpiredPayloads drops its day's partition from
 * then on). The one statement of the rule: the dashboard shows this time, the purge obeys it.
 */
export function payloadPurgeAt(createdAt: Date, retentionDays: number): Date {
  return new Date(utcDay(createdAt).getTime() + (1 + retentionDays) * DAY_MS);
}

/** Makes the daily partitions from the day of `from` to `daysAhead` days after `now`. Returns how many were created. */
export async function ensurePayloadPartitions(db: Queryable, now = new Date(), daysAhead = PARTITION_DAYS_AHEAD, from = now): Promise<number> {
  const { rows } = await run<{ made: number }>(
    db,
    sql`SELECT ensure_event_payload_partitions(${isoDay(utcDay(from))}::date, ${isoDay(new Date(utcDay(now).getTime() + (daysAhead + 1) * DAY_MS))}::date) AS made`,
  );
  return rows[0]?.made ?? 0;
}

/** True for the error PostgreSQL raises when a row's partition does not exist (yet). */
export const isMissingPartition = (error: unknown) =>
  (error as { code?: string }).code === "23514" && /no partition of relation/i.test((error as Error).message ?? "");

/** The time before which every payload is gone (the start of the oldest kept day). */
export async function payloadHorizon(db: Queryable): Promise<Date> {
  const { rows } = await run<{ at: Date }>(db, sql`SELECT payloads_purged_before AS at FROM retention_state WHERE id = 1`);
  return rows[0]?.at ?? new Date(0);
}

export interface PurgeResult {
  /** Partitions dropped (whole days of payloads). */
  droppedPartitions: string[];
  /** The horizon after the purge. */
  purgedBefore: Date;
}

/**
 * Drops the partitions whose whole day is older than `retentionDays` (so a payload is kept at
 * least that long, at most one day more), moves the horizon to the end of the newest dropped
 * day (or to `now - retentionDays` rounded down to a day, whichever is later), and makes sure the
 * partitions of the coming days exist. Idempotent; any number of dispatchers may run it.
 */
export async function purgeExpiredPayloads(pool: pg.Pool, retentionDays: number, now = new Date()): Promise<PurgeResult> {
  const cutoff = utcDay(new Date(now.getTime() - retentionDays * DAY_MS));
  const { rows } = await run<{ name: string }>(
    pool,
    sql`SELECT c.relname AS name FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
         WHERE i.inhparent = 'event_payloads'::regclass ORDER BY c.relname`,
  );
  const expired = rows
    .map((r) => r.name)
    .filter((name) => {
      const match = /^event_payloads_(\d{4})(\d{2})(\d{2})$/.exec(name);
      if (!match) return false;
      const day = new Date(Date.UTC(Number(match[1]), Number(match[2]) - 1, Number(match[3])));
      return payloadPurgeAt(day, retentionDays) <= now;
    });
  // The horizon moves first: from then on nobody reads those payloads, then they go.
  const { rows: horizon } = await run<{ at: Date }>(
    pool,
    sql`UPDATE retention_state SET payloads_purged_before = greatest(payloads_purged_before, ${cutoff})
         WHERE id = 1 RETURNING payloads_purged_before AS at`,
  );
  // Names come from pg_class and matched the pattern above: safe to quote as identifiers.
  for (const name of expired) await run(pool, sql`DROP TABLE IF EXISTS ${raw(`"${name}"`)}`);
  await ensurePayloadPartitions(pool, now);
  return { droppedPartitions: expired, purgedBefore: horizon[0]?.at ?? cutoff };
}

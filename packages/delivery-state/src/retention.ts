import type pg from "pg";
import sql, { raw } from "sql-template-tag";
import { run, type Queryable } from "./db.js";

/**
 * Payload retention (spec "Event record": the body is retained for 90 days; docs/api.md,
 * "Retention"). Payloads live in `event_payloads`, partitioned by the UTC day of the event's
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

/**
 * Makes the daily partitions from the day of `from` to `daysAhead` days after `now`. Returns how
 * many were created. Each is made as a table of its own and then attached (SQL function
 * ensure_event_payload_partitions), which neither readers nor inserts of event_payloads conflict
 * with; behind other DDL of the table it waits at most 1 s (the function's lock_timeout).
 * @throws the PostgreSQL error lock_not_available (55P03) when that wait ran out: try again later
 */
export async function ensurePayloadPartitions(
  db: Queryable,
  now = new Date(),
  daysAhead = PARTITION_DAYS_AHEAD,
  from = now,
): Promise<number> {
  const { rows } = await run<{ made: number }>(
    db,
    sql`SELECT ensure_event_payload_partitions(${isoDay(utcDay(from))}::date, ${isoDay(new Date(utcDay(now).getTime() + (daysAhead + 1) * DAY_MS))}::date) AS made`,
  );
  return rows[0]?.made ?? 0;
}

/**
 * True for the error PostgreSQL raises when a row of event_payloads finds no partition (yet): a
 * check_violation (23514) naming the partitioned table and no constraint. A CHECK constraint's
 * violation, the same SQLSTATE, always names its constraint (node-postgres's DatabaseError
 * carries both fields).
 */
export const isMissingPartition = (error: unknown) => {
  const { code, table, constraint } = (error ?? {}) as { code?: unknown; table?: unknown; constraint?: unknown };
  return code === "23514" && table === "event_payloads" && constraint === undefined;
};

/** The time before which every payload is gone (the start of the oldest kept day). */
export async function payloadHorizon(db: Queryable): Promise<Date> {
  const { rows } = await run<{ at: Date }>(db, sql`SELECT payloads_purged_before AS at FROM retention_state WHERE id = 1`);
  return rows[0]?.at ?? new Date(0);
}

export interface PurgeResult {
  /** Partitions dropped (whole days of payloads). */
  droppedPartitions: string[];
  /**
   * Expired partitions left for a later run because another session held event_payloads or the
   * partition past RETENTION_LOCK_TIMEOUT_MS (a long reader): their payloads are already past
   * the horizon, so nobody reads them; the next run drops them.
   */
  postponedPartitions: string[];
  /** Why the partitions above were left (the PostgreSQL error), or null. */
  postponedReason: string | null;
  /** False when the coming days' partitions could not be made this time (lock timeout); the next run makes them. */
  partitionsAheadMade: boolean;
  /** The horizon after the purge. */
  purgedBefore: Date;
}

/**
 * How long, in ms, retention waits for a lock before leaving a partition for its next run. Its
 * waits hold up no insert or read (see purgeExpiredPayloads), so this only bounds how long a run
 * stays behind a long reader.
 */
export const RETENTION_LOCK_TIMEOUT_MS = 1_000;

interface PayloadTable {
  name: string;
  /** Still a partition of event_payloads (false: detached by an earlier run, not yet dropped). */
  attached: boolean;
  /** Detached concurrently but not finalized (an earlier run gave up while waiting). */
  pending: boolean;
}

/**
 * Drops the partitions whose whole day is older than `retentionDays` (so a payload is kept at
 * least that long, at most one day more), moves the horizon to the end of the newest dropped
 * day (or to `now - retentionDays` rounded down to a day, whichever is later), and makes sure the
 * partitions of the coming days exist. Idempotent; any number of dispatchers may run it.
 *
 * DDL never blocks the hot path: dropping a partition outright would take ACCESS EXCLUSIVE on
 * event_payloads, and while that lock waits behind a long reader every payload insert and read
 * queues behind it. So a partition is first detached with `DETACH PARTITION ... CONCURRENTLY`
 * (SHARE UPDATE EXCLUSIVE on event_payloads: inserts and reads go on; it then waits for the
 * transactions that may still see the partition), then dropped as a table of its own, which
 * nobody else uses any more. Each of these waits gives up after `lockTimeoutMs`
 * (RETENTION_LOCK_TIMEOUT_MS): the partition, and those after it, are left for the next run (a
 * detach left half-way is finalized then), and the result says so. The partitions ahead are made
 * by ATTACH (ensure_event_payload_partitions), which readers and inserts do not conflict with.
 */
export async function purgeExpiredPayloads(
  pool: pg.Pool,
  retentionDays: number,
  now = new Date(),
  options: { lockTimeoutMs?: number } = {},
): Promise<PurgeResult> {
  const cutoff = utcDay(new Date(now.getTime() - retentionDays * DAY_MS));
  // The horizon moves first: from then on nobody reads those payloads, then they go.
  const { rows: horizon } = await run<{ at: Date }>(
    pool,
    sql`UPDATE retention_state SET payloads_purged_before = greatest(payloads_purged_before, ${cutoff})
         WHERE id = 1 RETURNING payloads_purged_before AS at`,
  );
  // The days ahead before the drops: a drop of this run waiting for a reader must not hold them up.
  let partitionsAheadMade = true;
  try {
    await ensurePayloadPartitions(pool, now);
  } catch (error) {
    if (!isLockTimeout(error)) throw error;
    partitionsAheadMade = false;
  }
  // Day tables of event_payloads' schema: its partitions, and those an earlier run detached but
  // could not drop yet. A detach left half-way goes first: only one may be pending at a time.
  const { rows } = await run<PayloadTable>(
    pool,
    sql`SELECT c.relname AS name, i.inhrelid IS NOT NULL AS attached, coalesce(i.inhdetachpending, false) AS pending
          FROM pg_class c
          LEFT JOIN pg_inherits i ON i.inhrelid = c.oid AND i.inhparent = 'event_payloads'::regclass
         WHERE c.relkind = 'r' AND c.relname ~ '^event_payloads_[0-9]{8}$'
           AND c.relnamespace = (SELECT relnamespace FROM pg_class WHERE oid = 'event_payloads'::regclass)
         ORDER BY coalesce(i.inhdetachpending, false) DESC, c.relname`,
  );
  const expired = rows.filter(({ name }) => {
    const match = /^event_payloads_(\d{4})(\d{2})(\d{2})$/.exec(name)!;
    const day = new Date(Date.UTC(Number(match[1]), Number(match[2]) - 1, Number(match[3])));
    return payloadPurgeAt(day, retentionDays) <= now;
  });
  const dropped: string[] = [];
  let postponedReason: string | null = null;
  if (expired.length > 0) {
    const client = await pool.connect();
    let broken: Error | undefined;
    const onError = (error: Error) => (broken = error);
    client.on("error", onError);
    try {
      // For this session (the drops run outside a transaction block), until the RESET below.
      await run(
        client,
        sql`SELECT set_config('lock_timeout', ${String(Math.max(1, Math.trunc(options.lockTimeoutMs ?? RETENTION_LOCK_TIMEOUT_MS)))}, false)`,
      );
      for (const table of expired) {
        try {
          await dropPayloadTable(client, table);
          dropped.push(table.name);
        } catch (error) {
          // A reader in the way (lock timeout), or another dispatcher purging at the same time:
          // this partition and the later ones wait for the next run.
          postponedReason = (error as Error).message;
          break;
        }
      }
      await run(client, sql`RESET lock_timeout`).catch((error: Error) => (broken = error));
    } finally {
      client.removeListener("error", onError);
      client.release(broken);
    }
  }
  return {
    droppedPartitions: dropped,
    postponedPartitions: expired.slice(dropped.length).map((t) => t.name),
    postponedReason,
    partitionsAheadMade,
    purgedBefore: horizon[0]?.at ?? cutoff,
  };
}

/**
 * Detaches (or finishes detaching) one day table, then drops it. Each statement runs on its own,
 * outside a transaction block, as DETACH CONCURRENTLY must. Names come from pg_class and matched
 * the day pattern: safe to quote as identifiers.
 */
async function dropPayloadTable(client: pg.PoolClient, table: PayloadTable): Promise<void> {
  // An identifier cannot be a parameter: the name goes into the text (see above).
  const name = raw(`"${table.name}"`);
  if (table.attached)
    await run(client, sql`ALTER TABLE "event_payloads" DETACH PARTITION ${name} ${table.pending ? sql`FINALIZE` : sql`CONCURRENTLY`}`);
  await run(client, sql`DROP TABLE IF EXISTS ${name}`);
}

/** True for lock_not_available (55P03): a lock_timeout ran out. */
const isLockTimeout = (error: unknown) => (error as { code?: string }).code === "55P03";

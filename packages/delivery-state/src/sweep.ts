import type pg from "pg";
import sql, { type Sql } from "sql-template-tag";
import { JOB_NAMES } from "@mailhooks/queue";
import { run } from "./db.js";
import { enqueueCte } from "./outbox.js";
import type { WorkKind } from "./attempts.js";

/**
 * Finding work whose job Redis lost (a flush, a failover, an eviction, a Redis without
 * persistence restarted). Every unit of work is a row that stays `pending` until its attempts
 * end, so the sweeper walks a deployment's pending rows in id order (ids are UUIDv7: time order)
 * from a cursor it keeps, batch after batch, wrapping around at the end: however many live jobs
 * there are, every row is looked at in turn (no starvation). Rows still in the outbox are not
 * lost: they wait for a relay. Whether a job exists is the caller's question to Redis.
 */

/** Work of one attempt records none before it ends: its attempts are 0. */
const NO_ATTEMPTS = sql`LEFT JOIN LATERAL (SELECT 0 AS attempts, NULL::timestamptz AS last_at) a ON true`;

/**
 * The table of each kind of work, and how its attempts so far are counted (`a.attempts`,
 * `a.last_at` of its row `w`).
 */
const WORK: Record<WorkKind, { table: Sql; attempts: Sql }> = {
  [JOB_NAMES.delivery]: {
    table: sql`destinations`,
    attempts: sql`LEFT JOIN LATERAL (SELECT count(*)::int AS attempts, max(x.created_at) AS last_at FROM deliveries x
                                      WHERE x.destination_id = w.id AND x.trigger IN ('initial', 'retry')) a ON true`,
  },
  [JOB_NAMES.replay]: { table: sql`replays`, attempts: NO_ATTEMPTS },
  [JOB_NAMES.testDelivery]: { table: sql`test_deliveries`, attempts: NO_ATTEMPTS },
};

export interface PendingWork {
  id: string;
  /** Attempts recorded so far (initial and retries; 0 for replays and test deliveries). */
  attempts: number;
  /** When the last recorded attempt was made, if any. */
  lastAttemptAt: Date | null;
}

/**
 * Up to `limit` pending rows of `kind` owned by `queuePrefix`, with ids after `afterId` (""
 * for the start), created before `createdBefore`, and not waiting in the outbox.
 */
export async function pendingWorkAfter(
  db: Pick<pg.Pool, "query">,
  kind: WorkKind,
  queuePrefix: string,
  afterId: string,
  createdBefore: Date,
  limit: number,
): Promise<PendingWork[]> {
  const { rows } = await run<{ id: string; attempts: number; last_at: Date | null }>(
    db,
    sql`SELECT w.id, a.attempts, a.last_at FROM ${WORK[kind].table} w ${WORK[kind].attempts}
         WHERE w.queue_prefix = ${queuePrefix} AND w.status = 'pending' AND w.id > ${afterId} AND w.created_at < ${createdBefore}
           AND NOT EXISTS (SELECT 1 FROM outbox o WHERE o.job_id = w.id)
         ORDER BY w.id LIMIT ${limit}`,
  );
  return rows.map((r) => ({ id: r.id, attempts: r.attempts, lastAttemptAt: r.last_at }));
}

/**
 * Puts lost work back in the outbox (the relays queue it): `data` is each job's data (for a
 * destination, the attempt to resume at and when it is due). Only rows still pending are
 * queued. Returns how many were.
 */
export async function requeueWork(
  pool: pg.Pool,
  kind: WorkKind,
  queuePrefix: string,
  jobs: { id: string; data: Record<string, unknown> }[],
): Promise<number> {
  if (jobs.length === 0) return 0;
  const { rows } = await run<{ n: number }>(
    pool,
    sql`WITH ${enqueueCte(
      queuePrefix,
      sql`SELECT ${kind}::text, u.id, u.data, w.webhook_id, w.account_id
            FROM unnest(${jobs.map((j) => j.id)}::text[], ${jobs.map((j) => JSON.stringify(j.data))}::jsonb[]) AS u(id, data)
            JOIN ${WORK[kind].table} w ON w.id = u.id AND w.status = 'pending'`,
    )} SELECT count(*)::int AS n FROM ob`,
  );
  return rows[0]?.n ?? 0;
}

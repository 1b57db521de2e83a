import sql, { type Sql } from "sql-template-tag";
import { run, type Queryable } from "./db.js";
import { webhookJobLimitSql, type WebhookClasses } from "./outbox.js";

/**
 * Leases of the fair scheduler (docs/scheduler.md): one row per job the relay handed to the
 * queue for a webhook (relayOutbox writes them), until its work ends. A webhook's leases are what
 * it holds in Redis; the relay hands it no more than DISPATCHER_WEBHOOK_JOB_LIMIT.
 */

/**
 * The CTE ending the leases of the work ids `workIds` (an SQL expression of type text[]):
 * `leases_ended` deletes them (its columns: work_id, queue_prefix, webhook_id). Unknown ids are
 * ignored (a lease dropped already, work relayed without one). The dispatcher that ended a lease
 * wakes its own relay when that relay held work back (Relay.room of apps/dispatcher).
 *
 * Nothing else is asked here, on purpose. Until 2026-11-27 this also looked for the webhook's
 * rows in the outbox and sent a NOTIFY when it had some: the look walks every index entry the
 * webhook's relayed rows left (until a VACUUM removes them: 290 index pages, 1.8 ms, after 28,000
 * deliveries of a bench run, for each attempt), and a transaction that sends NOTIFY holds
 * PostgreSQL's one lock of the notification queue through its commit's disk write, so every batch
 * of attempts waited for the others' and for the ingest's commits (bench/README.md, "Results on
 * 2026-11-27, afternoon").
 */
export function endLeasesCte(workIds: Sql): Sql {
  return sql`leases_ended AS (
      DELETE FROM webhook_leases WHERE work_id = ANY(${workIds}) RETURNING work_id, queue_prefix, webhook_id
    )`;
}

/**
 * Ends the leases of work whose job finished (delivered, failed for good, cancelled); see
 * endLeasesCte. An attempt that ends its destination ends the lease itself
 * (recordDestinationAttempts): this is for work that ends otherwise. Returns the work ids of
 * `workIds` that had no lease to end: usually none; see LATE_LEASE_RELEASE_MS.
 */
export async function releaseLeases(db: Queryable, workIds: string[]): Promise<string[]> {
  if (workIds.length === 0) return [];
  const { rows } = await run<{ unleased: string[] }>(
    db,
    sql`WITH ${endLeasesCte(sql`${workIds}::text[]`)}
        SELECT ARRAY(SELECT unnest(${workIds}::text[]) EXCEPT SELECT work_id FROM leases_ended) AS unleased`,
    "delivery_state_release_leases_v5",
  );
  return rows[0]?.unleased ?? [];
}

/**
 * How long after the end of its work, in ms, a lease that was not there to end is looked for
 * once more. The relay writes a job's lease in the transaction that claims its outbox row and
 * commits after Redis took the job (relayOutbox: a crash between the two must leave the row in
 * the outbox, not a job without a row); a worker that runs the job and records its end before
 * that commit cannot see the lease, which then outlives its work. The relay commits one round
 * trip after Redis answered, so a second look this much later finds it; should it not (a relay
 * stalled longer), the lease keeper drops it within its grace and interval.
 */
export const LATE_LEASE_RELEASE_MS = 1_000;

export interface Lease {
  workId: string;
  jobName: string;
}

/**
 * Up to `limit` leases of `queuePrefix` made more than `olderThanMs` ago, with work ids after
 * `afterWorkId` ("" for the start), in work id order: the lease keeper asks Redis whether their
 * jobs still live.
 */
export async function leasesAfter(
  db: Queryable,
  queuePrefix: string,
  afterWorkId: string,
  olderThanMs: number,
  limit: number,
): Promise<Lease[]> {
  const { rows } = await run<Lease>(
    db,
    sql`SELECT work_id AS "workId", job_name AS "jobName" FROM webhook_leases
         WHERE queue_prefix = ${queuePrefix} AND work_id > ${afterWorkId}
           AND created_at < now() - make_interval(secs => ${olderThanMs / 1000})
         ORDER BY work_id LIMIT ${limit}`,
  );
  return rows;
}

/**
 * Drops the leases `workIds` whose job is gone, if they are still older than `olderThanMs` (a
 * lease made again meanwhile, for a job the relay queued again, is kept). Returns how many were
 * dropped (the caller wakes its relay when any were).
 */
export async function dropLeases(db: Queryable, workIds: string[], olderThanMs: number): Promise<number> {
  if (workIds.length === 0) return 0;
  const { rows } = await run<{ n: number }>(
    db,
    sql`WITH gone AS (DELETE FROM webhook_leases
                       WHERE work_id = ANY(${workIds}::text[]) AND created_at < now() - make_interval(secs => ${olderThanMs / 1000})
                      RETURNING 1)
        SELECT count(*)::int AS n FROM gone`,
  );
  return rows[0]?.n ?? 0;
}

/** What waits in the scheduler of `queuePrefix`, for the metrics. */
export interface SchedulerBacklog {
  /** Outbox rows (work waiting in PostgreSQL for its webhook's share, or for a relay). */
  waiting: number;
  /** Webhooks that hold their job limit in the queue (their further work waits in the outbox). */
  webhooksAtLimit: number;
}

/**
 * The scheduler's backlog of `queuePrefix`: each webhook's job limit is `jobLimit` as `classes`
 * makes it (webhookJobLimitSql, the fair claim's rule).
 */
export async function schedulerBacklog(
  db: Queryable,
  queuePrefix: string,
  jobLimit: number,
  classes: WebhookClasses = { slow: [], fast: [] },
): Promise<SchedulerBacklog> {
  const { rows } = await run<SchedulerBacklog>(
    db,
    sql`SELECT (SELECT count(*)::int FROM outbox WHERE queue_prefix = ${queuePrefix}) AS waiting,
               (SELECT count(*)::int FROM (SELECT 1 FROM webhook_leases WHERE queue_prefix = ${queuePrefix}
                                           GROUP BY webhook_id
                                           HAVING count(*) >= ${webhookJobLimitSql(sql`webhook_id`, jobLimit, classes)}) x) AS "webhooksAtLimit"`,
  );
  return rows[0] ?? { waiting: 0, webhooksAtLimit: 0 };
}

/** A webhook's work waiting in the outbox, and the jobs it holds in the queue (the dashboard). */
export async function webhookBacklog(db: Queryable, queuePrefix: string, webhookId: string): Promise<{ waiting: number; queued: number }> {
  const { rows } = await run<{ waiting: number; queued: number }>(
    db,
    sql`SELECT (SELECT count(*)::int FROM outbox WHERE queue_prefix = ${queuePrefix} AND webhook_id = ${webhookId}) AS waiting,
               (SELECT count(*)::int FROM webhook_leases WHERE queue_prefix = ${queuePrefix} AND webhook_id = ${webhookId}) AS queued`,
  );
  return rows[0] ?? { waiting: 0, queued: 0 };
}

import type pg from "pg";
import sql, { join, type Sql } from "sql-template-tag";
import { isWorkJobName, type WorkJobName } from "@mailhooks/queue";
import { failWithoutAttempt } from "./attempts.js";
import { inTransaction, run } from "./db.js";

/**
 * The transactional outbox (CONTRIBUTING.md, Habits 10). Whatever a request accepts is committed with one
 * outbox row per job, in the same transaction; a relay in the dispatchers moves the rows into
 * BullMQ and deletes them. Rows belong to one deployment (`queue_prefix`): a relay only takes
 * its own. A trigger on the table notifies OUTBOX_CHANNEL, which wakes the relays at once; they
 * also poll, so a lost notification (or a relay started later) only delays.
 */

/** The LISTEN/NOTIFY channel; the payload is the QUEUE_PREFIX that has new rows. */
export const OUTBOX_CHANNEL = "webhooks_outbox";

/** The job of an outbox row: one of the registry's (WORK_JOBS of @mailhooks/queue). */
export type OutboxJobName = WorkJobName;

export interface OutboxEntry {
  jobName: OutboxJobName;
  /** The destination, replay or test delivery id: a second add of the same id is a no-op. */
  jobId: string;
  data: Record<string, unknown>;
  /** The webhook and the account the work is for: the relay shares capacity among them. */
  webhookId: string;
  accountId: string;
}

/** A claimed outbox row; rows written before their owner was recorded have none. */
export interface OutboxRow extends Omit<OutboxEntry, "webhookId" | "accountId"> {
  id: string;
  webhookId: string | null;
  accountId: string | null;
  /** Its place among its webhook's jobs in the queue (1: the webhook's first): its job's priority. */
  position: number;
}

/**
 * The CTE body inserting `entries` (a SELECT or VALUES yielding job_name, job_id, data,
 * webhook_id, account_id): `ob AS (...)`, returning one row per job. A trigger (`outbox_notify`)
 * wakes the relays.
 */
export function enqueueCte(queuePrefix: string, entries: Sql): Sql {
  return sql`ob AS (
      INSERT INTO outbox (queue_prefix, job_name, job_id, data, webhook_id, account_id)
      SELECT ${queuePrefix}, e.job_name, e.job_id, e.data, e.webhook_id, e.account_id
        FROM (${entries}) AS e(job_name, job_id, data, webhook_id, account_id)
      RETURNING 1
    )`;
}

/** Inserts `entries` in one statement of its own (inside the caller's transaction). */
export async function enqueue(db: Pick<pg.PoolClient, "query">, queuePrefix: string, entries: OutboxEntry[]): Promise<void> {
  if (entries.length === 0) return;
  const rows = join(
    entries.map((e) => sql`(${e.jobName}, ${e.jobId}, ${JSON.stringify(e.data)}::jsonb, ${e.webhookId}::text, ${e.accountId}::text)`),
  );
  await run(db, sql`WITH ${enqueueCte(queuePrefix, sql`VALUES ${rows}`)} SELECT count(*) FROM ob`);
}

/** A claimed row that `push` could not queue (data no worker could run, an unknown job name). */
export interface RejectedRow {
  row: OutboxRow;
  reason: string;
}

export interface RelayGuard {
  /**
   * How long, in ms, a claimed batch may hold its row locks: the transaction's
   * idle_in_transaction_session_timeout and statement_timeout. PostgreSQL ends the session past
   * it (a relay whose Redis hangs, whose process is frozen or whose host died), which releases
   * the rows to other relays. Must exceed what `push` may take.
   */
  lockTimeoutMs?: number;
}

/**
 * The job limit of a webhook the scheduler marked fast (quick attempts lately) and not slow:
 * 64 times the limit (1,024 by default). Its jobs leave the queue as fast as they enter it, so its
 * queue must hold what the dispatchers run between two relay passes (the relay hears of each
 * ended job through PostgreSQL), or they would wait for the relay beside a backlog.
 */
export function fastWebhookJobLimit(jobLimit: number): number {
  return jobLimit * 64;
}

/**
 * The scheduler's marks: the webhooks marked fast get the larger job limit, unless also marked
 * slow (a receiver that answered quickly, then started to hang).
 */
export interface WebhookClasses {
  slow: string[];
  fast: string[];
}

/**
 * The job limit of the webhook whose id is the SQL expression `webhookId`, as an int:
 * fastWebhookJobLimit of `jobLimit` when `classes` says fast and not slow, else `jobLimit`. The one
 * form of the rule for the fair claim and the metrics.
 */
export function webhookJobLimitSql(webhookId: Sql, jobLimit: number, classes: WebhookClasses): Sql {
  return sql`(CASE WHEN ${webhookId} = ANY(${classes.fast}::text[]) AND NOT ${webhookId} = ANY(${classes.slow}::text[])
                   THEN ${fastWebhookJobLimit(jobLimit)}::int ELSE ${jobLimit}::int END)`;
}

/**
 * The fair claim (docs/scheduler.md). The webhooks with rows waiting are
 * found by a loose index scan (one probe per webhook, however many rows wait); each may have up
 * to its job limit (`jobLimit`, 64 times it when fast) minus the
 * jobs it holds already (its leases); of those, rows are taken in turns
 * (every webhook's first, then every webhook's second, ...) up to `limit`, deleted, and leased
 * in the same statement. Rows written before outbox rows named their webhook are taken as
 * before, oldest first. It answers one row at least: `held_back` says whether some webhook had
 * more rows waiting than its room (then the relay is worth waking when a lease ends; see
 * relayOutbox), and rows with an `id` are the claimed ones. Exported for its plan's test
 * (claim.integration.test.ts): what a pass reads must not grow with the rows left waiting.
 */
export const claimStatement = (queuePrefix: string, limit: number, jobLimit: number, classes: WebhookClasses) => sql`
    WITH RECURSIVE hooks AS (
      (SELECT o.webhook_id FROM outbox o WHERE o.queue_prefix = ${queuePrefix} AND o.webhook_id IS NOT NULL ORDER BY o.webhook_id LIMIT 1)
      UNION ALL
      SELECT (SELECT o.webhook_id FROM outbox o WHERE o.queue_prefix = ${queuePrefix} AND o.webhook_id > h.webhook_id
               ORDER BY o.webhook_id LIMIT 1)
        FROM hooks h WHERE h.webhook_id IS NOT NULL
    ), room AS MATERIALIZED (
      -- LATERAL: a scalar subquery named twice (held, and the room from it) was counted twice.
      SELECT h.webhook_id, l.held, greatest(0, ${webhookJobLimitSql(sql`h.webhook_id`, jobLimit, classes)} - l.held) AS room
        FROM hooks h CROSS JOIN LATERAL (
          SELECT count(*)::int AS held FROM webhook_leases l WHERE l.queue_prefix = ${queuePrefix} AND l.webhook_id = h.webhook_id) l
       WHERE h.webhook_id IS NOT NULL
    ), fair AS (
      -- One row more than each webhook's room: when it is there, the webhook has more waiting than it may take.
      SELECT c.id, r.held, r.room, row_number() OVER (PARTITION BY r.webhook_id ORDER BY c.id)::int AS rn
        FROM room r CROSS JOIN LATERAL (
          SELECT o.id FROM outbox o WHERE o.queue_prefix = ${queuePrefix} AND o.webhook_id = r.webhook_id
           ORDER BY o.id LIMIT r.room + 1
           FOR UPDATE SKIP LOCKED) c
    ), candidates AS (
      SELECT id, held + rn AS position FROM fair WHERE rn <= room
      UNION ALL
      SELECT c.id, 1 FROM (SELECT o.id FROM outbox o WHERE o.queue_prefix = ${queuePrefix} AND o.webhook_id IS NULL
                            ORDER BY o.id LIMIT ${limit}::int FOR UPDATE SKIP LOCKED) c
    ), picked AS (
      SELECT id, position FROM candidates ORDER BY position, id LIMIT ${limit}::int
    ), claimed AS (
      -- By the primary key, row by row: joined to picked instead, the planner hashed the whole outbox.
      DELETE FROM outbox o WHERE o.id = ANY(ARRAY(SELECT id FROM picked))
      RETURNING o.id, o.job_name, o.job_id, o.data, o.webhook_id, o.account_id
    ), leased AS (
      INSERT INTO webhook_leases (work_id, queue_prefix, webhook_id, account_id, job_name)
      SELECT job_id, ${queuePrefix}, webhook_id, account_id, job_name FROM claimed WHERE webhook_id IS NOT NULL AND account_id IS NOT NULL
      ON CONFLICT (work_id) DO UPDATE SET created_at = now()
      RETURNING 1
    )
    SELECT c.*, p.position, (SELECT count(*) FROM leased)::int AS leased, f.held_back
      FROM (SELECT EXISTS (SELECT 1 FROM fair WHERE rn > room) AS held_back) f LEFT JOIN (claimed c JOIN picked p USING (id)) ON true`;

/** What one relayOutbox call did. */
export interface RelayPass {
  claimed: number;
  rejected: RejectedRow[];
  /**
   * Some webhook had more rows waiting than it could take (at its job limit): the end of one of
   * its leases leaves room worth a relay pass. False when every row the claim saw was taken.
   * Rows locked by another relay's claim are not seen: a relay that ran beside another may say
   * false while that one says true, and then leaves the webhook's ended leases to the other relay,
   * to the next new row's notification, or to its own poll (RELAY_POLL_INTERVAL_MS).
   */
  heldBack: boolean;
}

/**
 * Moves outbox rows of `queuePrefix` into the queue, in one transaction, sharing the queue among
 * webhooks (the fair claim above: each webhook holds at most its job limit in Redis, from
 * `jobLimit` and `classes`, the rest waits here): claims up to `limit` rows with `FOR UPDATE SKIP LOCKED` (any number of relays
 * share the work, each row goes to one; each relay keeps a webhook at `jobLimit`, so the bound
 * holds per relay pass), deletes and leases them in the same statement, calls `push` (which must
 * add them to BullMQ with their job ids and return the rows it could not), ends the work of the
 * rejected rows `failed` without an attempt (it could never run; queueing it again would fail
 * again), and commits. When `push` throws (Redis away), the transaction rolls back: the rows are
 * back for the next run, unleased. Two round trips precede `push` (BEGIN with the guard's
 * settings; the claim), one follows it (COMMIT). Returns how many rows were claimed, the rejected
 * ones, and whether work was held back (RelayPass).
 */
export async function relayOutbox(
  pool: pg.Pool,
  queuePrefix: string,
  limit: number,
  push: (rows: OutboxRow[]) => Promise<RejectedRow[]>,
  guard: RelayGuard,
  jobLimit: number,
  classes: WebhookClasses = { slow: [], fast: [] },
): Promise<RelayPass> {
  const ms = guard.lockTimeoutMs ? Math.ceil(guard.lockTimeoutMs) : undefined;
  return inTransaction(
    pool,
    async (client) => {
      const answer = await run<{
        id: string | null;
        job_name: OutboxJobName;
        job_id: string;
        data: Record<string, unknown>;
        webhook_id: string | null;
        account_id: string | null;
        position: number;
        held_back: boolean;
      }>(client, claimStatement(queuePrefix, limit, jobLimit, classes), "delivery_state_claim_outbox_fair_v3");
      const heldBack = answer.rows[0]?.held_back ?? false;
      const rows = answer.rows.filter((r): r is typeof r & { id: string } => r.id !== null);
      if (rows.length === 0) return { claimed: 0, rejected: [], heldBack };
      // RETURNING has no order: jobs are added in turns (position), oldest first within a turn.
      rows.sort((a, b) => a.position - b.position || (BigInt(a.id) < BigInt(b.id) ? -1 : 1));
      const rejected = await push(
        rows.map((r) => ({
          id: r.id,
          jobName: r.job_name,
          jobId: r.job_id,
          data: r.data,
          webhookId: r.webhook_id,
          accountId: r.account_id,
          position: r.position,
        })),
      );
      for (const { row } of rejected) {
        // A row of no known job names no work this service could end.
        if (isWorkJobName(row.jobName)) await failWithoutAttempt(client, row.jobName, row.jobId);
      }
      if (rejected.length > 0)
        await run(client, sql`DELETE FROM webhook_leases WHERE work_id = ANY(${rejected.map((r) => r.row.jobId)}::text[])`);
      return { claimed: rows.length, rejected, heldBack };
    },
    // A COMMIT that waits for the WAL to reach the disk waits for the disk's worst moments (writes
    // of 100 ms on this machine's virtual disk, several a minute), and every event that reached
    // the outbox meanwhile waits for the next pass. Losing this commit in a PostgreSQL crash is
    // harmless: the rows come back and are queued again under the same job ids. An attempt
    // recorded after this commit flushed it (the WAL is written in order); for a job still running
    // at the crash, queueing it again is a no-op while it is in Redis, and once its attempt was
    // recorded the new job finds its work ended and sends nothing (tests/chaos/relay-commit-lost).
    { synchronous_commit: "off", ...(ms ? { idle_in_transaction_session_timeout: ms, statement_timeout: ms } : {}) },
  );
}

/**
 * VACUUMs the scheduler's queue tables, `outbox` and `webhook_leases` (the dispatchers' maintenance,
 * every OUTBOX_VACUUM_INTERVAL_MS). Every delivery inserts and deletes a row in each, and a row
 * deleted leaves its index entries until a VACUUM: the relay's claim walks the entries its
 * webhooks' relayed rows and ended leases left, on every pass (after 28,000 deliveries of a bench
 * run, 290 index pages and 3,400 dead lease rows for one webhook: 1 to 2 ms a look). Autovacuum
 * takes them at its own pace (a minute's naptime by default, or never where it is off), so the
 * service keeps them few itself: at most what arrives in one interval. Tables a VACUUM of another
 * session holds are skipped (SKIP_LOCKED); the next run takes them. Runs outside a transaction
 * (VACUUM cannot run in one). Without parallel index workers (PARALLEL 0): starting them cost
 * 50 ms of the 80 a run took after 5,000 deliveries, for indexes of a few hundred pages. Without
 * truncating the tables' emptied tail (TRUNCATE false): that takes an exclusive lock on the table,
 * which the relay's claim, the ingest and the attempts would wait for, and the next rows extend the
 * file again. Throws what PostgreSQL throws.
 */
export async function vacuumQueueTables(db: Pick<pg.Pool, "query">): Promise<void> {
  await db.query("VACUUM (SKIP_LOCKED, PARALLEL 0, TRUNCATE false) outbox, webhook_leases");
}

/** Outbox rows of `queuePrefix` not yet relayed (for /readyz and metrics). */
export async function outboxBacklog(db: Pick<pg.Pool, "query">, queuePrefix: string): Promise<number> {
  const { rows } = await run<{ n: number }>(db, sql`SELECT count(*)::int AS n FROM outbox WHERE queue_prefix = ${queuePrefix}`);
  return rows[0]?.n ?? 0;
}

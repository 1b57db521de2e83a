import sql, { join, type Sql } from "sql-template-tag";
import type { ClaimedWork, WorkJobName } from "@mailhooks/queue";
import { run, runStatement, type Queryable } from "./db.js";

/**
 * The work queue (docs/scheduler.md): one row of `work_items` per unit of work that has not
 * ended (a destination, a replay, a test delivery). What a request accepts is committed with its
 * rows, in the same transaction; a trigger then notifies WORK_CHANNEL, which wakes the relays.
 * The claim (claim.ts) leases rows; the statement that ends a unit of work deletes its row, and
 * one that schedules a retry gives it back with its new attempt and due time. A lease is valid
 * until `leased_until` (the visibility timeout), which its holder's heartbeat renews; once it
 * expires the row is claimable again and the old lease's job, should it still run, acts on nothing.
 */

/** The LISTEN/NOTIFY channel; each payload is `<queue_prefix> <webhook_id>` of a webhook given work. */
export const WORK_CHANNEL = "webhooks_work";

/** A unit of work to queue. */
export interface WorkEntry {
  kind: WorkJobName;
  /** The destination, replay or test delivery id. */
  workId: string;
  webhookId: string;
  accountId: string;
  /** A replay to a target_url: it goes while its webhook is paused. */
  bypassPause?: boolean;
}

/** A unit of work and the lease a claim took of it (the data of its job). */
export interface LeasedWork {
  workId: string;
  lease: number;
}

/**
 * The CTE body queueing `entries` (a SELECT or VALUES yielding kind, work_id, webhook_id,
 * account_id, bypass_pause): `queued AS (...)`, one row per unit of work.
 */
export function enqueueCte(queuePrefix: string, entries: Sql): Sql {
  return sql`queued AS (
      INSERT INTO work_items (queue_prefix, kind, work_id, webhook_id, account_id, bypass_pause)
      SELECT ${queuePrefix}, e.kind, e.work_id, e.webhook_id, e.account_id, e.bypass_pause
        FROM (${entries}) AS e(kind, work_id, webhook_id, account_id, bypass_pause)
      RETURNING 1
    )`;
}

/** Queues `entries` in one statement of its own (inside the caller's transaction). */
export async function enqueue(db: Queryable, queuePrefix: string, entries: WorkEntry[]): Promise<void> {
  if (entries.length === 0) return;
  const rows = join(
    entries.map(
      (e) => sql`(${e.kind}::text, ${e.workId}::text, ${e.webhookId}::text, ${e.accountId}::text, ${e.bypassPause ?? false}::boolean)`,
    ),
  );
  await run(db, sql`WITH ${enqueueCte(queuePrefix, sql`VALUES ${rows}`)} SELECT count(*) FROM queued`);
}

/**
 * The CTE ending the units of work `workIds` (an SQL expression of type text[]): `work_ended`
 * deletes their rows, whatever lease they carry (the work is over).
 */
export function endWorkCte(workIds: Sql): Sql {
  return sql`work_ended AS (DELETE FROM work_items WHERE work_id = ANY(${workIds}) RETURNING work_id)`;
}

/**
 * Gives leased work back to the queue without an attempt: the leases of `work` (a job that did not
 * reach Redis, a webhook paused between the claim and the attempt) end, each row waits again, due
 * at its due time or `delayMs` from now if later, and its webhook goes back into the round by then,
 * the relays being woken. A lease that is no longer the row's current one is left alone.
 */
export async function releaseWork(db: Queryable, work: LeasedWork[], delayMs = 0): Promise<void> {
  if (work.length === 0) return;
  await runStatement(
    db,
    sql`WITH released AS (
          UPDATE work_items i SET leased_until = NULL, reserved = false,
                 due_at = greatest(i.due_at, now() + make_interval(secs => ${delayMs / 1000}))
            FROM unnest(${work.map((w) => w.workId)}::text[], ${work.map((w) => w.lease)}::int[]) AS r(work_id, lease)
           WHERE i.work_id = r.work_id AND i.lease = r.lease AND i.leased_until IS NOT NULL
          RETURNING i.queue_prefix, i.webhook_id, i.due_at
        )
        , placed AS (
          UPDATE webhook_queues q SET ready_at = least(coalesce(q.ready_at, 'infinity'), r.due_at)
            FROM (SELECT queue_prefix, webhook_id, min(due_at) AS due_at FROM released GROUP BY queue_prefix, webhook_id) r
           WHERE q.queue_prefix = r.queue_prefix AND q.webhook_id = r.webhook_id
          RETURNING q.queue_prefix, q.webhook_id
        )
        SELECT pg_notify(${WORK_CHANNEL}, queue_prefix || ' ' || webhook_id) FROM placed`,
  );
}

/**
 * The statement putting `webhookId` back in the claim's round at once, in every deployment where it
 * has work (a paused webhook resumed, a rate_limit changed), and waking those deployments' relays.
 */
export function backInRound(webhookId: string): Sql {
  return sql`WITH placed AS (
      UPDATE webhook_queues SET ready_at = least(coalesce(ready_at, 'infinity'), now()) WHERE webhook_id = ${webhookId}
      RETURNING queue_prefix
    )
    SELECT pg_notify(${WORK_CHANNEL}, queue_prefix || ' ' || ${webhookId}) FROM placed`;
}

/**
 * A dispatcher's heartbeat: it is live with `slots` and `reserve` slots until now plus
 * `visibilityTimeoutMs`, and so are the leases of `running` (the work its worker runs now), each
 * while it is still the work's current lease. Dispatchers not seen for an hour are forgotten.
 */
export async function heartbeat(
  db: Queryable,
  dispatcher: { id: string; queuePrefix: string; slots: number; reserve: number; visibilityTimeoutMs: number },
  running: LeasedWork[],
): Promise<void> {
  const until = sql`now() + make_interval(secs => ${dispatcher.visibilityTimeoutMs / 1000})`;
  await runStatement(
    db,
    sql`WITH me AS (
          INSERT INTO dispatchers (id, queue_prefix, slots, reserve, seen_until)
          VALUES (${dispatcher.id}, ${dispatcher.queuePrefix}, ${dispatcher.slots}, ${dispatcher.reserve}, ${until})
          ON CONFLICT (id) DO UPDATE SET seen_until = EXCLUDED.seen_until, slots = EXCLUDED.slots, reserve = EXCLUDED.reserve
          RETURNING 1
        ), renewed AS (
          -- A row held elsewhere is not waited for: it is an attempt's record in progress (the
          -- lease ends with it) or a claim's, and a wait could close a cycle with it (a deadlock).
          -- A lease skipped now is renewed by the next beat: it lasts three.
          UPDATE work_items i SET leased_until = ${until}
           WHERE i.id = ANY(ARRAY(
                   SELECT w.id FROM work_items w
                     JOIN unnest(${running.map((w) => w.workId)}::text[], ${running.map((w) => w.lease)}::int[]) AS r(work_id, lease)
                       ON w.work_id = r.work_id AND w.lease = r.lease
                    WHERE w.leased_until IS NOT NULL
                      FOR UPDATE OF w SKIP LOCKED))
          RETURNING 1
        )
        DELETE FROM dispatchers WHERE queue_prefix = ${dispatcher.queuePrefix} AND seen_until < now() - interval '1 hour'`,
  );
}

/** A dispatcher that stops (SIGTERM, after its attempts ended) takes its slots away at once. */
export async function forgetDispatcher(db: Queryable, dispatcherId: string): Promise<void> {
  await run(db, sql`DELETE FROM dispatchers WHERE id = ${dispatcherId}`);
}

/** What waits and runs in the queue of `queuePrefix`, for the metrics. */
export interface QueueBacklog {
  /** Units of work waiting (for their turn, their retry's time, a paused webhook). */
  waiting: number;
  /** Units of work leased (running, or on their way to a worker). */
  leased: number;
  /** Webhooks in the round now (waiting work that may start). */
  readyWebhooks: number;
  /** Webhooks paused now (of every deployment: a webhook belongs to none). */
  pausedWebhooks: number;
}

export async function queueBacklog(db: Queryable, queuePrefix: string): Promise<QueueBacklog> {
  const { rows } = await run<QueueBacklog>(
    db,
    sql`SELECT (SELECT count(*)::int FROM work_items WHERE queue_prefix = ${queuePrefix} AND leased_until IS NULL) AS waiting,
               (SELECT count(*)::int FROM work_items WHERE queue_prefix = ${queuePrefix} AND leased_until > now()) AS leased,
               (SELECT count(*)::int FROM webhook_queues WHERE queue_prefix = ${queuePrefix} AND ready_at <= now()) AS "readyWebhooks",
               (SELECT count(*)::int FROM webhooks WHERE status = 'paused' AND deleted_at IS NULL) AS "pausedWebhooks"`,
  );
  return rows[0] ?? { waiting: 0, leased: 0, readyWebhooks: 0, pausedWebhooks: 0 };
}

/** A webhook's work: waiting (due or not), and leased (running). */
export async function webhookBacklog(db: Queryable, webhookId: string): Promise<{ waiting: number; running: number }> {
  const { rows } = await run<{ waiting: number; running: number }>(
    db,
    sql`SELECT (count(*) FILTER (WHERE leased_until IS NULL))::int AS waiting, (count(*) FILTER (WHERE leased_until > now()))::int AS running
          FROM work_items WHERE webhook_id = ${webhookId}`,
  );
  return rows[0] ?? { waiting: 0, running: 0 };
}

export type { ClaimedWork };

import sql from "sql-template-tag";
import { newId } from "@mailhooks/db";
import { JOB_NAMES, type WorkJobName } from "@mailhooks/queue";
import { runStatement, type Queryable } from "./db.js";
import { INTERNAL_ERROR } from "./attempt-common.js";
import { endReplayWithoutAttempt } from "./replay-attempts.js";
import { failTestDeliveryWithoutAttempt } from "./test-attempts.js";
import { moveDestinationCte } from "./status.js";

/**
 * The dispatcher's side of delivery state: what one attempt needs, read in one query, and what it
 * leaves, written in one statement (the delivery row with the transition it causes), for the
 * three kinds of work: destinations, replays and test deliveries (one file each).
 */
export * from "./attempt-common.js";
export * from "./destination-attempts.js";
export * from "./replay-attempts.js";
export * from "./test-attempts.js";

/**
 * The kinds of delivery work: the jobs of @mailhooks/queue's registry that carry a unit of work
 * (a destination, a replay, a test delivery), by name.
 */
export type WorkKind = WorkJobName;

/**
 * Ends pending work that provably cannot be carried out (its job failed for a reason that is not
 * a delivery failure nor an outage: a bug, a constraint, corrupt stored data, or it kept killing
 * the dispatchers that ran it), and says why (docs/api.md, "Deliveries log": nothing ends without a row
 * or audit entry that says why): `failed`, with a delivery row whose `error` is `error`
 * (INTERNAL_ERROR by default) and no response. A destination's row takes its next attempt number;
 * a replay also gets its audit entry. One statement each; work no longer pending is left alone.
 *
 * When PostgreSQL refuses that row itself (a constraint or a trigger: the very thing that may have
 * poisoned the job), the work still ends, `failed` without it: pending work behind a failed job
 * would otherwise be handed to this function again and again.
 * @throws what PostgreSQL threw when it is unreachable or the statement could not run for a
 *   passing reason (the caller, or the sweeper later, tries again)
 */
export async function failWithoutAttempt(db: Queryable, kind: WorkKind, id: string, error: string = INTERNAL_ERROR): Promise<void> {
  const ending = ENDINGS[kind];
  try {
    await ending.withRow(db, id, error);
  } catch (refused) {
    if (!refusedByData(refused)) throw refused;
    await ending.withoutRow(db, id, error);
  }
}

/**
 * An error of the statement itself (SQLSTATE classes 22 data, 23 integrity, P0 raised by a
 * trigger, 42 a bug in the statement), as opposed to the connection, resources or a conflict
 * that another run would not meet.
 */
function refusedByData(error: unknown): boolean {
  const code = (error as { code?: unknown }).code;
  return typeof code === "string" && /^(22|23|P0|42)/.test(code);
}

/** How each kind of work ends `failed`: with its delivery row, or (that row refused) without it. */
interface Ending {
  withRow: (db: Queryable, id: string, error: string) => Promise<void>;
  withoutRow: (db: Queryable, id: string, error: string) => Promise<void>;
}

const ENDINGS: Record<WorkKind, Ending> = {
  [JOB_NAMES.delivery]: {
    withRow: async (db, id, error) => {
      await runStatement(
        db,
        sql`WITH ${moveDestinationCte(id, "failed", ["pending"])},
            next AS (
              SELECT coalesce(max(x.attempt) + 1, 0) AS attempt FROM deliveries x
               WHERE x.destination_id = ${id} AND x.trigger IN ('initial', 'retry')
            )
            INSERT INTO deliveries (id, account_id, event_id, webhook_id, destination_id, url, trigger, attempt, response_status, error,
                                    response_body, duration_ms, created_at)
            SELECT ${newId("dlv")}::text, d.account_id, d.event_id, d.webhook_id, d.id, w.url,
                   (CASE WHEN next.attempt = 0 THEN 'initial' ELSE 'retry' END)::"DeliveryTrigger", next.attempt, NULL, ${error}::text,
                   NULL, 0, now()
              FROM moved JOIN destinations d ON d.id = ${id} JOIN webhooks w ON w.id = d.webhook_id CROSS JOIN next
            ON CONFLICT DO NOTHING`,
      );
    },
    withoutRow: async (db, id) => {
      await runStatement(db, sql`WITH ${moveDestinationCte(id, "failed", ["pending"])} SELECT count(*) FROM moved`);
    },
  },
  [JOB_NAMES.replay]: {
    withRow: (db, id, error) => endReplayWithoutAttempt(db, id, "failed", error, true),
    withoutRow: async (db, id, error) => {
      // Its audit entry, at least, if only the delivery row was refused.
      try {
        await endReplayWithoutAttempt(db, id, "failed", error, false);
      } catch (refused) {
        if (!refusedByData(refused)) throw refused;
        await runStatement(db, sql`UPDATE replays SET status = 'failed', updated_at = now() WHERE id = ${id} AND status = 'pending'`);
      }
    },
  },
  [JOB_NAMES.testDelivery]: {
    withRow: failTestDeliveryWithoutAttempt,
    withoutRow: async (db, id) => {
      await runStatement(db, sql`UPDATE test_deliveries SET status = 'failed', updated_at = now() WHERE id = ${id} AND status = 'pending'`);
    },
  },
};

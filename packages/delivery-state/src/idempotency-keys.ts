import type pg from "pg";
import sql from "sql-template-tag";
import { run } from "./db.js";
import { IDEMPOTENCY_WINDOW_HOURS } from "./ingest.js";

/**
 * Removes idempotency keys older than the 24 h they are honoured for, `batchSize` rows per
 * statement so that no transaction grows with the backlog. Returns how many were removed.
 */
export async function purgeIdempotencyKeys(pool: Pick<pg.Pool, "query">, batchSize = 1_000, now = new Date()): Promise<number> {
  let total = 0;
  for (;;) {
    const { rowCount } = await run(
      pool,
      sql`DELETE FROM idempotency_keys WHERE ctid = ANY(ARRAY(
            SELECT ctid FROM idempotency_keys
             WHERE created_at < ${now}::timestamptz - make_interval(hours => ${IDEMPOTENCY_WINDOW_HOURS})
             LIMIT ${batchSize}))`,
    );
    total += rowCount ?? 0;
    if ((rowCount ?? 0) < batchSize) return total;
  }
}

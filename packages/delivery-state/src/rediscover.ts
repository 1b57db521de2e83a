import sql from "sql-template-tag";
import { run, type Queryable } from "./db.js";

/**
 * Puts every webhook with waiting work of `prefix` in the round (notifications sent while the
 * relay was not listening are lost): one index probe per webhook with waiting work, of any
 * deployment, however many rows wait.
 */
export async function rediscover(client: Queryable, prefix: string): Promise<void> {
  await run(
    client,
    sql`WITH RECURSIVE hooks AS (
          (SELECT webhook_id FROM work_items WHERE leased_until IS NULL ORDER BY webhook_id LIMIT 1)
          UNION ALL
          SELECT (SELECT i.webhook_id FROM work_items i WHERE i.leased_until IS NULL AND i.webhook_id > h.webhook_id
                   ORDER BY i.webhook_id LIMIT 1)
            FROM hooks h WHERE h.webhook_id IS NOT NULL
        )
        INSERT INTO webhook_queues (queue_prefix, webhook_id, account_id, ready_at)
        SELECT ${prefix}, w.id, w.account_id, now() FROM hooks h JOIN webhooks w ON w.id = h.webhook_id
         WHERE EXISTS (SELECT 1 FROM work_items i WHERE i.webhook_id = h.webhook_id AND i.queue_prefix = ${prefix} AND i.leased_until IS NULL)
        ON CONFLICT (queue_prefix, webhook_id) DO UPDATE SET ready_at = least(coalesce(webhook_queues.ready_at, 'infinity'), now())`,
  );
}

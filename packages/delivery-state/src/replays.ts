import type pg from "pg";
import sql from "sql-template-tag";
import { newId } from "@mailhooks/db";
import { JOB_NAMES, WORK_JOBS } from "@mailhooks/queue";
import { run } from "./db.js";
import { enqueueCte } from "./outbox.js";

/**
 * Accepting replays (docs/api.md, "Replay"): the replay rows and their outbox rows in one
 * statement. Which destinations to replay to is decided by the caller (the API's replay rules);
 * each replay is then one attempt, recorded by `recordReplayAttempt`.
 */

export interface ReplayTarget {
  webhookId: string;
  destinationId: string;
  destinationUrl: string;
  /** The webhook's own URL: a success then makes the destination `delivered`. */
  toOwnUrl: boolean;
  /** Asked for with a target_url: sent even if the webhook is disabled or deleted meanwhile. */
  hasTargetUrl: boolean;
}

export interface AcceptedReplay {
  replayId: string;
  webhookId: string;
  destinationUrl: string;
}

export async function acceptReplays(
  pool: pg.Pool,
  input: { accountId: string; apiKeyId: string; eventId: string; queuePrefix: string; targets: ReplayTarget[] },
): Promise<AcceptedReplay[]> {
  const replays = input.targets.map((t) => ({ ...t, id: newId("rpl") }));
  const now = new Date();
  await run(
    pool,
    sql`
    WITH r AS (
      INSERT INTO replays (id, account_id, event_id, webhook_id, destination_id, destination_url, to_own_url, has_target_url,
                           api_key_id, queue_prefix, created_at, updated_at)
      SELECT t.id, ${input.accountId}, ${input.eventId}, t.webhook_id, t.destination_id, t.destination_url, t.to_own_url, t.has_target_url,
             ${input.apiKeyId}, ${input.queuePrefix}, ${now}, ${now}
        FROM unnest(${replays.map((r) => r.id)}::text[], ${replays.map((r) => r.webhookId)}::text[],
                    ${replays.map((r) => r.destinationId)}::text[], ${replays.map((r) => r.destinationUrl)}::text[],
                    ${replays.map((r) => r.toOwnUrl)}::boolean[], ${replays.map((r) => r.hasTargetUrl)}::boolean[])
             AS t(id, webhook_id, destination_id, destination_url, to_own_url, has_target_url)
      RETURNING id, webhook_id, account_id
    ), ${enqueueCte(input.queuePrefix, sql`SELECT ${JOB_NAMES.replay}::text, id, jsonb_build_object(${WORK_JOBS[JOB_NAMES.replay].workIdField}::text, id), webhook_id, account_id FROM r`)}
    SELECT count(*) FROM ob`,
  );
  return replays.map((r) => ({ replayId: r.id, webhookId: r.webhookId, destinationUrl: r.destinationUrl }));
}

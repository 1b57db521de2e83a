import type pg from "pg";
import sql from "sql-template-tag";
import { newId } from "@mailhooks/db";
import { JOB_NAMES } from "@mailhooks/queue";
import { run } from "./db.js";
import { enqueueCte } from "./work-queue.js";

/**
 * Accepting replays (docs/api.md, "Replay"): the replay rows and their rows of the work queue in
 * one statement (a replay to a target_url goes while its webhook is paused). Which destinations to replay to is decided by the caller (the API's replay rules);
 * each replay is then one attempt, recorded by `recordReplayAttempt`.
 */

export interface ReplayTarget {
  webhookId: string;
  destinationId: string;
  /** Null: a listen webhook's own destination (pulled). */
  destinationUrl: string | null;
  /** The webhook's own URL: a success then makes the destination `delivered`. */
  toOwnUrl: boolean;
  /** Asked for with a target_url: sent even if the webhook is disabled or deleted meanwhile. */
  hasTargetUrl: boolean;
}

export interface AcceptedReplay {
  replayId: string;
  webhookId: string;
  destinationUrl: string | null;
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
      RETURNING id, webhook_id, account_id, has_target_url
    ), ${enqueueCte(input.queuePrefix, sql`SELECT ${JOB_NAMES.replay}::text, id, webhook_id, account_id, has_target_url FROM r`)}
    SELECT count(*) FROM queued`,
  );
  return replays.map((r) => ({ replayId: r.id, webhookId: r.webhookId, destinationUrl: r.destinationUrl }));
}

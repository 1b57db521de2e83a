import { newId, type PrismaClient, Prisma } from "@mailhooks/db";
import type { AttemptResult } from "./send.js";
import { moveDestination } from "./store.js";

/** PostgreSQL side of a replay (CONTRACT.md section 7). */

export interface ReplayTarget {
  replayId: string;
  accountId: string;
  eventId: string;
  webhookId: string;
  destinationId: string;
  destinationUrl: string;
  toOwnUrl: boolean;
  apiKeyId: string;
  secret: string;
  payload: string | null;
  /** True once this replay's delivery row exists (the job ran before). */
  done: boolean;
}

export async function loadReplay(prisma: PrismaClient, replayId: string): Promise<ReplayTarget | null> {
  const rows = await prisma.$queryRaw<ReplayTarget[]>`
    SELECT r.id AS "replayId", r.account_id AS "accountId", r.event_id AS "eventId", r.webhook_id AS "webhookId",
           r.destination_id AS "destinationId", r.destination_url AS "destinationUrl", r.to_own_url AS "toOwnUrl",
           r.api_key_id AS "apiKeyId", w.secret, e.payload,
           EXISTS (SELECT 1 FROM deliveries x WHERE x.replay_id = r.id) AS done
      FROM replays r
      JOIN webhooks w ON w.id = r.webhook_id
      JOIN events e ON e.id = r.event_id
     WHERE r.id = ${replayId}`;
  return rows[0] ?? null;
}

/**
 * Writes the replay's one delivery row and one audit entry in one statement; a success to the
 * webhook's own URL also makes the destination `delivered`. Unique replay ids make a second
 * write (a job re-run after a crash) a no-op.
 */
export async function recordReplay(prisma: PrismaClient, target: ReplayTarget, result: AttemptResult, replayedAt: Date): Promise<void> {
  const delivers = result.ok && target.toOwnUrl;
  // A pending destination (retries still scheduled) or a failed one becomes delivered.
  const move = delivers ? moveDestination(target.destinationId, "delivered", ["pending", "failed"]) : Prisma.sql`nothing AS (SELECT 1) SELECT 1`;
  await prisma.$executeRaw`
    WITH row AS (
      INSERT INTO deliveries (id, account_id, event_id, webhook_id, destination_id, url, trigger, attempt,
                              response_status, error, duration_ms, replay_id)
      VALUES (${newId("dlv")}, ${target.accountId}, ${target.eventId}, ${target.webhookId}, ${target.destinationId},
              ${target.destinationUrl}, 'replay'::"DeliveryTrigger", 0, ${result.responseStatus}, ${result.error},
              ${result.durationMs}, ${target.replayId})
      ON CONFLICT (replay_id) DO NOTHING
    ), audit AS (
      INSERT INTO audit_entries (id, account_id, event_id, replay_id, webhook_id, replayed_at, destination_url,
                                 response_status, error, api_key_id)
      VALUES (${newId("aud")}, ${target.accountId}, ${target.eventId}, ${target.replayId}, ${target.webhookId}, ${replayedAt},
              ${target.destinationUrl}, ${result.responseStatus}, ${result.error}, ${target.apiKeyId})
      ON CONFLICT (replay_id) DO NOTHING
    ), ${move}`;
}

import { z } from "zod";
import { newId } from "@mailhooks/db";
import { getLogger } from "@mailhooks/logger";
import { requireQueue, type ApiDeps } from "../deps.js";
import { AppError, notFound } from "../errors.js";
import type { Principal } from "./api-keys.js";
import { assertDeliverableUrl, httpsUrl } from "./webhooks.js";

/**
 * Replay (spec "Replay an event"; CONTRACT.md section 7). Answers at once; each replay is one
 * attempt made by the dispatcher, which then writes one delivery row and one audit entry.
 * There is no bulk replay: one call replays one event (see the replay CLI for many).
 */

const logger = getLogger("replays");

export const replayRequestSchema = z.strictObject({
  target_url: httpsUrl.optional(),
  webhook_id: z.string().min(1).max(100).optional(),
});
export type ReplayRequest = z.infer<typeof replayRequestSchema>;

export interface ReplayAccepted {
  event_id: string;
  replays: { replay_id: string; webhook_id: string; destination_url: string }[];
}

interface DestinationRow {
  id: string;
  webhook_id: string;
  url: string;
}

/**
 * Plans and queues the replays of one event.
 * @throws AppError not_found (unknown event, or another account's), payload_expired (410, payload
 *   purged), conflict (no destination to replay to, several and no webhook_id with a target_url,
 *   or a webhook_id that is not a destination of the event), unavailable (queue unreachable;
 *   nothing is left behind).
 */
export async function requestReplay(deps: ApiDeps, principal: Principal, eventId: string, input: ReplayRequest): Promise<ReplayAccepted> {
  if (input.target_url !== undefined) assertDeliverableUrl(deps, input.target_url, "target_url");
  requireQueue(deps);
  const event = await deps.prisma.event.findFirst({ where: { id: eventId, accountId: principal.accountId }, select: { id: true, payloadPurgedAt: true } });
  if (!event) throw notFound("event");
  if (event.payloadPurgedAt) throw new AppError("payload_expired", "the event's payload is past retention and can no longer be replayed");

  // Deleted webhooks answer 404 everywhere, so they are not replay destinations either.
  let destinations = await deps.prisma.$queryRaw<DestinationRow[]>`
    SELECT d.id, d.webhook_id, w.url FROM destinations d JOIN webhooks w ON w.id = d.webhook_id
     WHERE d.event_id = ${eventId} AND d.account_id = ${principal.accountId} AND w.deleted_at IS NULL
     ORDER BY d.id`;
  if (input.webhook_id !== undefined) {
    destinations = destinations.filter((d) => d.webhook_id === input.webhook_id);
    if (destinations.length === 0) throw new AppError("conflict", `webhook ${input.webhook_id} is not a destination of this event`);
  }
  if (destinations.length === 0) throw new AppError("conflict", "the event has no destination to replay to");
  if (input.target_url !== undefined && destinations.length > 1) {
    throw new AppError("conflict", "the event has several destinations: name the one whose secret signs the replay with webhook_id");
  }

  const rows = destinations.map((d) => {
    const destinationUrl = input.target_url ?? d.url;
    return {
      id: newId("rpl"),
      accountId: principal.accountId,
      eventId,
      webhookId: d.webhook_id,
      destinationId: d.id,
      destinationUrl,
      toOwnUrl: destinationUrl === d.url,
      apiKeyId: principal.apiKeyId,
    };
  });
  await deps.prisma.replay.createMany({ data: rows });
  try {
    await deps.queue.addReplays(rows.map((r) => ({ replayId: r.id })));
  } catch (error) {
    await deps.prisma.replay
      .deleteMany({ where: { id: { in: rows.map((r) => r.id) } } })
      .catch((cleanup) => logger.error("could not remove replays that were not queued", { error: (cleanup as Error).message }));
    throw error;
  }
  return { event_id: eventId, replays: rows.map((r) => ({ replay_id: r.id, webhook_id: r.webhookId, destination_url: r.destinationUrl })) };
}

import { z } from "zod";
import { acceptReplays } from "@mailhooks/delivery-state";
import { readPayload } from "./events.js";
import type { ApiDeps } from "../deps.js";
import { AppError, notFound } from "../errors.js";
import type { Principal } from "@mailhooks/access";
import type { ReplayAccepted } from "../schemas/events.js";
import { assertDeliverableUrl, httpsUrl } from "./webhook-input.js";

/**
 * Replay (spec "Replay an event"; docs/api.md, "Replay"). Answers at once; each replay is one
 * attempt made by the dispatcher, which then writes one delivery row and one audit entry.
 * There is no bulk replay: one call replays one event (see the replay CLI for many).
 */

export const replayRequestSchema = z.strictObject({
  target_url: httpsUrl.optional(),
  webhook_id: z.string().min(1).max(100).optional(),
});
export type ReplayRequest = z.infer<typeof replayRequestSchema>;

export type { ReplayAccepted };

interface DestinationRow {
  id: string;
  webhook_id: string;
  /** Null for a listen webhook: a replay to it without target_url is pulled. */
  url: string | null;
  enabled: boolean;
}

/**
 * Plans the replays of one event (docs/api.md, "Replay") and accepts them: the replay rows and
 * their work queue rows are committed together, then the answer (202) follows.
 * Without `target_url`: one replay per destination (or only `webhook_id`'s) whose webhook is
 * still enabled or paused (there it waits for the resume), to its current URL. With `target_url`: one replay there, signed with the secret
 * of `webhook_id` or of the only destination, even if that webhook is disabled.
 * @throws AppError not_found (unknown event, or another account's), payload_expired (410, payload
 *   purged), conflict (nothing to replay to: no destination, none enabled, several and no
 *   webhook_id with a target_url, or a webhook_id that is not a destination of the event)
 */
export async function requestReplay(deps: ApiDeps, principal: Principal, eventId: string, input: ReplayRequest): Promise<ReplayAccepted> {
  if (input.target_url !== undefined) assertDeliverableUrl(deps, input.target_url, "target_url");
  const event = await deps.prisma.event.findFirst({
    where: { id: eventId, accountId: principal.accountId },
    select: { id: true, createdAt: true },
  });
  if (!event) throw notFound("event");
  if ((await readPayload(deps, event)) === null)
    throw new AppError("payload_expired", "payload_purged", "the event's payload is past retention and can no longer be replayed");

  // docs/api.md, "Replay": to a target_url, a disabled or deleted webhook's secret still signs;
  // without one, only enabled webhooks get a replay, and paused ones, where it waits for the resume.
  let destinations = await deps.prisma.$queryRaw<DestinationRow[]>`
    SELECT d.id, d.webhook_id, w.url, (w.status IN ('enabled', 'paused') AND w.deleted_at IS NULL) AS enabled
      FROM destinations d JOIN webhooks w ON w.id = d.webhook_id
     WHERE d.event_id = ${eventId} AND d.account_id = ${principal.accountId}
     ORDER BY d.id`;
  if (input.webhook_id !== undefined) {
    destinations = destinations.filter((d) => d.webhook_id === input.webhook_id);
    if (destinations.length === 0)
      throw new AppError("conflict", "webhook_not_a_destination", `webhook ${input.webhook_id} is not a destination of this event`);
  }
  if (destinations.length === 0) throw new AppError("conflict", "no_destination", "the event has no destination to replay to");
  if (input.target_url !== undefined && destinations.length > 1) {
    throw new AppError(
      "conflict",
      "several_destinations",
      "the event has several destinations: name the one whose secret signs the replay with webhook_id",
    );
  }
  if (input.target_url === undefined) {
    destinations = destinations.filter((d) => d.enabled);
    if (destinations.length === 0)
      throw new AppError("conflict", "destinations_disabled", "the event's webhooks are disabled: enable one, or replay to a target_url");
  }

  const replays = await acceptReplays(deps.pool, {
    accountId: principal.accountId,
    apiKeyId: principal.apiKeyId,
    eventId,
    queuePrefix: deps.config.QUEUE_PREFIX,
    targets: destinations.map((d) => {
      const destinationUrl = input.target_url ?? d.url;
      return {
        webhookId: d.webhook_id,
        destinationId: d.id,
        destinationUrl,
        toOwnUrl: destinationUrl === d.url,
        hasTargetUrl: input.target_url !== undefined,
      };
    }),
  });
  return {
    event_id: eventId,
    replays: replays.map((r) => ({ replay_id: r.replayId, webhook_id: r.webhookId, destination_url: r.destinationUrl })),
  };
}

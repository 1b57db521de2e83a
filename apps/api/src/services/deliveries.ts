import type { Delivery } from "@mailhooks/db";
import type { ApiDeps } from "../deps.js";
import { keysetPage, type Cursor, type Page } from "../http/pagination.js";
import type { DeliveryView } from "../schemas/deliveries.js";

/** The deliveries log (docs/api.md, "Deliveries log"): one row per attempt, newest first. */

export type { DeliveryView };

export interface DeliveryFilter {
  event_id?: string;
  webhook_id?: string;
  limit: number;
  cursor?: Cursor;
}

/** A row of the deliveries log as answered. */
export const toDeliveryView = (d: Delivery): DeliveryView => ({
  id: d.id,
  event_id: d.eventId,
  webhook_id: d.webhookId,
  url: d.url,
  trigger: d.trigger,
  attempt: d.attempt,
  response_status: d.responseStatus,
  error: d.error,
  response_body: d.responseBody,
  duration_ms: d.durationMs,
  created_at: d.createdAt.toISOString(),
});

export async function listDeliveries(deps: ApiDeps, accountId: string, filter: DeliveryFilter): Promise<Page<DeliveryView>> {
  const where = {
    accountId,
    ...(filter.event_id ? { eventId: filter.event_id } : {}),
    ...(filter.webhook_id ? { webhookId: filter.webhook_id } : {}),
  };
  return keysetPage("createdAt", filter, where, (query) => deps.prisma.delivery.findMany(query), toDeliveryView);
}

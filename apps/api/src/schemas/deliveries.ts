import { z } from "zod";
import { prefixedId, timestamp } from "./common.js";
import { webhookId } from "./webhooks.js";

/** A row of the deliveries log (docs/api.md, "Deliveries log"): one per attempt. */
export const deliverySchema = z
  .object({
    id: prefixedId("dlv", "delivery row id"),
    event_id: z.string().nullable().meta({ description: "null for the test event sent at webhook creation" }),
    webhook_id: webhookId,
    url: z
      .string()
      .nullable()
      .meta({ description: "where the attempt was sent; null for an attempt pulled by a listen webhook (docs/develop-locally.md)" }),
    trigger: z.enum(["initial", "retry", "replay", "test"]),
    attempt: z.number().int().min(0).meta({ description: "0 for the initial attempt, n for retry n; 0 for replays and tests" }),
    response_status: z.number().int().nullable().meta({ description: "the status received (3xx included), else null" }),
    error: z.string().nullable().meta({
      description:
        "null when a response was received, else timeout, connection_error, tls_error, dns_error, blocked_destination, insecure_url, payload_expired, or internal_error (work the service itself could not carry out)",
    }),
    response_body: z
      .string()
      .nullable()
      .meta({ description: "at most the first 4096 bytes of the receiver's answer as text (invalid UTF-8 replaced), or null" }),
    duration_ms: z.number().int().min(0),
    created_at: timestamp,
  })
  .meta({ id: "Delivery" });
export type DeliveryView = z.infer<typeof deliverySchema>;

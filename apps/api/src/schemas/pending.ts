import { z } from "zod";
import { prefixedId } from "./common.js";

/** A listen webhook's pending deliveries (docs/develop-locally.md): what a pull answers. */

export const pendingDeliverySchema = z
  .object({
    delivery_id: prefixedId(
      "dlv",
      "the id of the delivery row your answer writes (POST /v1/webhooks/{id}/pending/{delivery_id}); a test's is the `delivery_id` POST /v1/webhooks/{id}/test answered",
    ),
    event_id: z
      .string()
      .nullable()
      .meta({ description: "the event's id; null for a test", example: "evt_019a2b3c4d5e7f00a1b2c3d4e5f60718" }),
    trigger: z.enum(["initial", "retry", "replay", "test"]),
    attempt: z.number().int().min(0).meta({ description: "0 for the initial attempt, n for retry n; 0 for replays and tests" }),
    headers: z.record(z.string(), z.string()).meta({
      description:
        "the request's headers, names lower-case, as the webhook's signature scheme signs them now (signed when pulled): content-type, x-service-event-id, the signature headers, the webhook's own headers",
      example: {
        "user-agent": "mailhooks-dispatcher/1",
        "content-type": "application/json",
        "x-service-event-id": "evt_019a2b3c4d5e7f00a1b2c3d4e5f60718",
        "x-service-timestamp": "1795867200",
        "x-service-signature": "sha256=5257a869e7ecebeda32affa62cdca3fa51cad7e77a0e56ff536d0ce8e108d8bd",
      },
    }),
    body: z.string().meta({
      description: "the exact bytes to POST (the UTF-8 JSON envelope, as text): the signature covers them byte for byte",
      example: '{"event":"message.delivered","timestamp":1795867200,"data":{"messageId":"<id@example.com>"}}',
    }),
  })
  .meta({ id: "PendingDelivery" });
export type PendingDeliveryView = z.infer<typeof pendingDeliverySchema>;

export const pendingListSchema = z
  .object({
    data: z.array(pendingDeliverySchema).meta({ description: "the longest waiting first; empty when nothing came within `wait`" }),
  })
  .meta({ id: "PendingDeliveries" });
export type PendingListView = z.infer<typeof pendingListSchema>;

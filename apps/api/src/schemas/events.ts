import { z } from "zod";
import {
  EVENT_TYPES,
  eventDataSchemas,
  OPERATIONAL_EVENT_TYPES,
  SUBSCRIBABLE_EVENT_TYPES,
  TEST_EVENT_TYPE,
  type EventType,
  type OperationalEventType,
} from "@mailhooks/events";
import { prefixedId, timestamp } from "./common.js";
import { webhookId } from "./webhooks.js";

/** Events as the API shows them (docs/api.md, "Events"). */

export const eventId = prefixedId("evt", "event id; used in the replay path");
export const eventStatus = z.enum(["pending", "delivered", "failed"]).meta({
  description:
    "pending while any destination is pending, else failed if any failed or was cancelled, else delivered (also with no destination)",
});

/** The answer to POST /v1/events, to each item of a batch, and to POST /v1/inboxes/{inbox_id}/messages. */
export const eventSummarySchema = z
  .object({
    event_id: eventId,
    event_type: z.enum(SUBSCRIBABLE_EVENT_TYPES).meta({ description: "one of the six email kinds, or an operational kind" }),
    inbox_id: z.string().nullable().meta({ description: "`data.inboxId`; null for an operational event (it belongs to the account)" }),
    status: eventStatus,
    occurred_at: timestamp.meta({ description: "when it happened (defaults to the time of ingest); the envelope's `timestamp`" }),
    created_at: timestamp.meta({ description: "when the service accepted it" }),
  })
  .meta({ id: "EventSummary" });
export type EventSummary = z.infer<typeof eventSummarySchema>;

export const eventBatchSchema = z
  .object({ data: z.array(eventSummarySchema).meta({ description: "one summary per item, in request order" }) })
  .meta({ id: "EventBatchResult" });

/** An item of GET /v1/events. */
export const eventListItemSchema = eventSummarySchema
  .extend({
    message_id: z.string().meta({ description: "`data.messageId`" }),
    payload_retained: z
      .boolean()
      .meta({ description: "false once the payload is past EVENT_RETENTION_DAYS: it can no longer be replayed" }),
  })
  .meta({ id: "EventListItem" });
export type EventListItem = z.infer<typeof eventListItemSchema>;

/** The signed envelope of one kind: the exact JSON body sent to receivers. */
const envelopeOf = (kind: EventType, name: string) =>
  z
    .strictObject({
      event: z.literal(kind),
      timestamp: z.number().int().meta({ description: "`occurred_at` in Unix seconds" }),
      data: eventDataSchemas[kind],
    })
    .meta({ id: `${name}Envelope` });

const ENVELOPE_NAMES: Record<EventType, string> = {
  "message.sent": "MessageSent",
  "message.delivered": "MessageDelivered",
  "message.opened": "MessageOpened",
  "message.clicked": "MessageClicked",
  "message.received": "MessageReceived",
  "message.bounced": "MessageBounced",
};

/** The kinds' schema names, e.g. `MessageSent` (also used by the request schemas of the document). */
export const eventKindName = (kind: EventType) => ENVELOPE_NAMES[kind];

/** The envelope of each kind, e.g. `MessageSentEnvelope`. */
export const envelopeSchemas = Object.fromEntries(EVENT_TYPES.map((kind) => [kind, envelopeOf(kind, ENVELOPE_NAMES[kind])])) as Record<
  EventType,
  ReturnType<typeof envelopeOf>
>;

/**
 * The `data` of each operational kind (docs/api.md, "Operational events"), keys in the envelope's
 * order (OPERATIONAL_DATA_KEYS of @mailhooks/events).
 */
const aboutWebhook = {
  webhookId: webhookId.meta({ description: "the webhook it is about (never the one receiving it)" }),
  url: z
    .string()
    .nullable()
    .meta({ description: "that webhook's URL; null for a listen webhook", example: "https://receiver.example.com/hooks" }),
};
const lastFailure = {
  lastStatus: z.number().int().nullable().meta({ description: "the last failed attempt's HTTP status; null when no answer came" }),
  lastError: z
    .string()
    .nullable()
    .meta({ description: "the last failed attempt's `error` as the deliveries log shows it (`timeout`, ...); null when an answer came" }),
};
const failingSince = timestamp.meta({ description: "when the failed attempts in a row began" });

const operationalDataSchemas = {
  "webhook.failing": z.strictObject({
    ...aboutWebhook,
    failingSince,
    consecutiveFailures: z.number().int().min(1).meta({ description: "attempts failed in a row when it was made (5)" }),
    ...lastFailure,
  }),
  "webhook.recovered": z.strictObject({
    ...aboutWebhook,
    failingSince,
    recoveredAt: timestamp.meta({ description: "its first 2xx after `webhook.failing`" }),
  }),
  "webhook.disabled": z.strictObject({
    ...aboutWebhook,
    reason: z.enum(["manual", "failing", "idle"]).meta({
      description:
        "`manual`: by a person (PATCH, the dashboard); `failing`: by auto-disable; `idle`: a listen webhook not pulled for LISTEN_IDLE_HOURS (its `disabled_reason`)",
    }),
  }),
  "destination.failed": z.strictObject({
    eventId: eventId.meta({ description: "the email event that was not delivered" }),
    eventType: z.enum(EVENT_TYPES).meta({ description: "that event's kind" }),
    ...aboutWebhook,
    attempts: z.number().int().min(1).meta({ description: "attempts made: the initial one and its retries" }),
    ...lastFailure,
  }),
} satisfies Record<OperationalEventType, z.ZodObject>;

const OPERATIONAL_ENVELOPE_NAMES: Record<OperationalEventType, string> = {
  "webhook.failing": "WebhookFailing",
  "webhook.recovered": "WebhookRecovered",
  "webhook.disabled": "WebhookDisabled",
  "destination.failed": "DestinationFailed",
};

const operationalEnvelopeOf = (kind: OperationalEventType) =>
  z
    .strictObject({
      event: z.literal(kind),
      timestamp: z.number().int().meta({ description: "when it happened, in Unix seconds (its event's `occurred_at`)" }),
      data: operationalDataSchemas[kind],
    })
    .meta({ id: `${OPERATIONAL_ENVELOPE_NAMES[kind]}Envelope` });

/** The envelope of each operational kind, e.g. `DestinationFailedEnvelope`. */
export const operationalEnvelopeSchemas = Object.fromEntries(
  OPERATIONAL_EVENT_TYPES.map((kind) => [kind, operationalEnvelopeOf(kind)]),
) as Record<OperationalEventType, ReturnType<typeof operationalEnvelopeOf>>;

/** The test event's envelope (docs/api.md, "Test events"): sent once when a webhook is created. */
export const testEnvelopeSchema = z
  .strictObject({
    event: z.literal(TEST_EVENT_TYPE),
    timestamp: z.number().int().meta({ description: "Unix seconds" }),
    data: z.strictObject({ webhookId: webhookId, url: z.string().nullable().meta({ description: "null for a listen webhook" }) }),
  })
  .meta({ id: "TestEventEnvelope" });

type AnyEnvelope = ReturnType<typeof envelopeOf> | ReturnType<typeof operationalEnvelopeOf>;

export const envelopeSchema = z
  .discriminatedUnion("event", [
    ...EVENT_TYPES.map((kind) => envelopeSchemas[kind]),
    ...OPERATIONAL_EVENT_TYPES.map((kind) => operationalEnvelopeSchemas[kind]),
  ] as unknown as [AnyEnvelope, ...AnyEnvelope[]])
  .meta({
    id: "Envelope",
    description: "the envelope whose compact JSON serialization (keys in this order) is the exact body signed and sent",
  });

export const destinationSchema = z
  .object({
    webhook_id: webhookId,
    url: z.string().nullable().meta({ description: "the webhook's current URL; null for a listen webhook" }),
    status: z
      .enum(["pending", "delivered", "failed", "cancelled"])
      .meta({ description: "cancelled: the webhook was disabled or deleted before it was delivered" }),
    attempts: z.number().int().min(0).meta({ description: "every delivery row of this destination, replays included" }),
  })
  .meta({ id: "Destination" });
export type DestinationView = z.infer<typeof destinationSchema>;

/** GET /v1/events/{event_id}. */
export const eventDetailSchema = eventListItemSchema
  .extend({
    payload: envelopeSchema.nullable().meta({ description: "the envelope, or null once purged" }),
    destinations: z.array(destinationSchema).meta({ description: "one per webhook the event went to" }),
  })
  .meta({ id: "EventDetail" });
export type EventDetail = z.infer<typeof eventDetailSchema>;

/** 202 of POST /v1/events/{event_id}/replay (docs/api.md, "Replay"). */
export const replayAcceptedSchema = z
  .object({
    event_id: eventId,
    replays: z.array(
      z.object({
        replay_id: prefixedId("rpl", "replay id"),
        webhook_id: webhookId,
        destination_url: z
          .string()
          .nullable()
          .meta({ description: "where this replay is sent: the webhook's URL or the target_url; null: pulled by a listen webhook" }),
      }),
    ),
  })
  .meta({ id: "ReplayAccepted" });
export type ReplayAccepted = z.infer<typeof replayAcceptedSchema>;

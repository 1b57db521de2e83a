import { z } from "zod";
import type { ZodOpenApiPathItemObject, ZodOpenApiPathsObject } from "zod-openapi";
import {
  EVENT_EXAMPLES,
  EVENT_TYPES,
  OPERATIONAL_EVENT_TYPES,
  OPERATIONAL_EXAMPLES,
  TEST_EVENT_TYPE,
  type EventType,
  type OperationalEventType,
} from "@mailhooks/events";
import {
  EVENT_ID_HEADER,
  SIGNATURE_HEADER,
  STANDARD_ID_HEADER,
  STANDARD_SIGNATURE_HEADER,
  STANDARD_TIMESTAMP_HEADER,
  TIMESTAMP_HEADER,
} from "@mailhooks/signing";
import { envelopeSchemas, operationalEnvelopeSchemas, testEnvelopeSchema } from "../schemas/events.js";
import { json } from "./paths/media.js";

/**
 * The requests the service sends to receivers (spec "Outbound request to the receiver";
 * docs/receivers.md), as the document's `webhooks`: one per envelope `event`, each with the
 * example a test request of that kind sends (EVENT_EXAMPLES, with a fresh messageId;
 * OPERATIONAL_EXAMPLES, about the webhook tested).
 */

const signedHeaders = z.object({
  [TIMESTAMP_HEADER]: z
    .string()
    .regex(/^\d+$/)
    .optional()
    .meta({ description: '`signature_scheme: "service"` (the default): Unix seconds at sending; the first part of the signed message' }),
  [SIGNATURE_HEADER]: z
    .string()
    .regex(/^sha256=[0-9a-f]{64}$/)
    .optional()
    .meta({
      description:
        '`signature_scheme: "service"`: `sha256=` and the lowercase hex HMAC-SHA256, keyed with the webhook secret\'s UTF-8 bytes, of `<X-Service-Timestamp>.<body>`; verify it in constant time before processing',
    }),
  [EVENT_ID_HEADER]: z.string().meta({
    description:
      "the event's `event_id`: the same on every retry and replay of one event, so de-duplicate on it (`data.messageId` is shared by every event of one message); a test request carries its delivery row's `id`",
    example: "evt_019a2b3c4d5e7f00a1b2c3d4e5f60718",
  }),
  [STANDARD_ID_HEADER]: z.string().optional().meta({
    description: '`signature_scheme: "standard"` (Standard Webhooks): the value of X-Service-Event-Id',
    example: "evt_019a2b3c4d5e7f00a1b2c3d4e5f60718",
  }),
  [STANDARD_TIMESTAMP_HEADER]: z
    .string()
    .regex(/^\d+$/)
    .optional()
    .meta({ description: '`signature_scheme: "standard"`: Unix seconds at sending' }),
  [STANDARD_SIGNATURE_HEADER]: z.string().optional().meta({
    description:
      "`signature_scheme: \"standard\"`: `v1,<base64 HMAC-SHA256>` over `<webhook-id>.<webhook-timestamp>.<body>`, keyed with the bytes the secret's base64 after `whsec_` decodes to; during a rotation's grace one per secret, space-separated (`v1,<old> v1,<new>`). The official `standardwebhooks` libraries verify it",
    example: "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
  }),
});

/** Said of every request: the webhook's own headers come along. */
const OWN_HEADERS =
  "Every request also carries the webhook's own `headers` (set on the webhook; e.g. the `Authorization` your gateway wants), on the initial attempt, its retries, replays (to an override URL too) and test requests.";

/** The envelope a receiver gets for `kind`, with the kind's example data. */
const exampleEnvelope = (kind: EventType) => ({ event: kind, timestamp: 1795341600, data: EVENT_EXAMPLES[kind] });

/** The envelope of an operational kind, with the kind's example data. */
const operationalExample = (kind: OperationalEventType) => ({ event: kind, timestamp: 1795341600, data: OPERATIONAL_EXAMPLES[kind] });

/** When each operational kind is sent (docs/api.md, "Operational events"). */
const OPERATIONAL_WHEN: Record<OperationalEventType, string> = {
  "webhook.failing": "Sent once when another webhook of the account has failed 5 attempts in a row; not again until it recovers.",
  "webhook.recovered": "Sent at another webhook's first 2xx after its `webhook.failing`.",
  "webhook.disabled":
    "Sent when another webhook of the account is disabled, by a person (`manual`), by auto-disable (`failing`), or, a listen webhook, for not being pulled for LISTEN_IDLE_HOURS (`idle`).",
  "destination.failed":
    "Sent when an email event's delivery to another webhook of the account has failed for good (its initial attempt and every retry).",
};

const responses = {
  "2XX": { description: "received; any 2xx within DELIVERY_TIMEOUT_MS (30 s) is a success" },
  default: {
    description:
      "anything else (3xx included: redirects are never followed), or no answer in time, fails: retried after 10 s, 60 s and 300 s (replays and the test event are one attempt)",
  },
};

export const outboundWebhooks: ZodOpenApiPathsObject = Object.fromEntries<ZodOpenApiPathItemObject>([
  ...EVENT_TYPES.map((kind): [EventType, ZodOpenApiPathItemObject] => [
    kind,
    {
      post: {
        operationId: `${kind.replace(".", "_")}_webhook`,
        summary: `${kind} delivered to your endpoint`,
        description: `The body is the compact JSON envelope exactly as signed. Deliveries may repeat (retries, replays): de-duplicate by \`${EVENT_ID_HEADER}\`. ${OWN_HEADERS} \`POST /v1/webhooks/{id}/test\` with this \`event_type\` sends this example with a fresh \`messageId\` ending \`@example.invalid\`.`,
        requestParams: { header: signedHeaders },
        requestBody: { required: true, content: { "application/json": { schema: envelopeSchemas[kind], example: exampleEnvelope(kind) } } },
        responses,
      },
    },
  ]),
  ...OPERATIONAL_EVENT_TYPES.map((kind): [OperationalEventType, ZodOpenApiPathItemObject] => [
    kind,
    {
      post: {
        operationId: `${kind.replace(".", "_")}_webhook`,
        summary: `${kind} delivered to your endpoint (an operational event)`,
        description: `${OPERATIONAL_WHEN[kind]} An event of the account (\`inbox_id\` null), delivered to every webhook subscribed to \`${kind}\` except the one it is about, retried and replayable like any event; none is made about an operational event's own delivery. De-duplicate by \`${EVENT_ID_HEADER}\`. ${OWN_HEADERS} \`POST /v1/webhooks/{id}/test\` with this \`event_type\` sends this example about the webhook tested (its \`webhookId\` and \`url\`).`,
        requestParams: { header: signedHeaders },
        requestBody: {
          required: true,
          content: { "application/json": { schema: operationalEnvelopeSchemas[kind], example: operationalExample(kind) } },
        },
        responses,
      },
    },
  ]),
  [
    TEST_EVENT_TYPE,
    {
      post: {
        operationId: "webhook_test_webhook",
        summary: "The test event, sent once when a webhook is created (and by `POST /v1/webhooks/{id}/test` without `event_type`)",
        description: OWN_HEADERS,
        requestParams: { header: signedHeaders },
        requestBody: { required: true, content: json(testEnvelopeSchema) },
        responses,
      },
    },
  ],
]);

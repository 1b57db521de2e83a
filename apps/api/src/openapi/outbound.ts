import { z } from "zod";
import type { ZodOpenApiPathsObject } from "zod-openapi";
import { EVENT_TYPES, TEST_EVENT_TYPE } from "@mailhooks/events";
import { SIGNATURE_HEADER, TIMESTAMP_HEADER } from "@mailhooks/signing";
import { envelopeSchemas, testEnvelopeSchema } from "../views/events.js";
import { json } from "./paths/media.js";

/**
 * The requests the service sends to receivers (spec "Outbound request to the receiver";
 * CONTRACT.md section 6), as the document's `webhooks`: one per envelope `event`.
 */

const signedHeaders = z.object({
  [TIMESTAMP_HEADER]: z.string().regex(/^\d+$/).meta({ description: "Unix seconds at sending; the first part of the signed message" }),
  [SIGNATURE_HEADER]: z
    .string()
    .regex(/^sha256=[0-9a-f]{64}$/)
    .meta({ description: "`sha256=` and the lowercase hex HMAC-SHA256, keyed with the webhook secret's UTF-8 bytes, of `<X-Service-Timestamp>.<body>`; verify it in constant time before processing" }),
});

const responses = {
  "2XX": { description: "received; any 2xx within DELIVERY_TIMEOUT_MS (30 s) is a success" },
  default: { description: "anything else (3xx included: redirects are never followed), or no answer in time, fails: retried after 10 s, 60 s and 300 s (replays and the test event are one attempt)" },
};

export const outboundWebhooks: ZodOpenApiPathsObject = Object.fromEntries([
  ...EVENT_TYPES.map((kind) => [
    kind,
    {
      post: {
        operationId: `${kind.replace(".", "_")}_webhook`,
        summary: `${kind} delivered to your endpoint`,
        description: "The body is the compact JSON envelope exactly as signed. Deliveries may repeat (retries, replays): de-duplicate by `data.messageId`.",
        requestParams: { header: signedHeaders },
        requestBody: { required: true, content: json(envelopeSchemas[kind]) },
        responses,
      },
    },
  ]),
  [
    TEST_EVENT_TYPE,
    {
      post: {
        operationId: "webhook_test_webhook",
        summary: "The test event, sent once when a webhook is created",
        requestParams: { header: signedHeaders },
        requestBody: { required: true, content: json(testEnvelopeSchema) },
        responses,
      },
    },
  ],
]);

import { z } from "zod";
import type { ZodOpenApiPathsObject } from "zod-openapi";
import { MESSAGE_LIMIT_BYTES } from "../../http/body.js";
import { idempotencyKey } from "../../routes/events.js";
import { inboxId } from "../../routes/inbound.js";
import { eventSummarySchema } from "../../schemas/events.js";
import { errorResponses } from "../responses.js";
import { json } from "./media.js";

/** POST /v1/inboxes/{inbox_id}/messages (docs/api.md, "Events"). */
export const inboundPaths: ZodOpenApiPathsObject = {
  "/v1/inboxes/{inbox_id}/messages": {
    post: {
      operationId: "receiveMessage",
      tags: ["Events"],
      summary: "Feed a raw RFC 5322 message",
      description:
        "The message becomes a `message.received` event (its Message-ID, In-Reply-To and References as its headers carry them; the same `threadId` for every message of one thread), or `message.bounced` of the original message for a delivery status notification (`multipart/report; report-type=delivery-status`).",
      requestParams: {
        path: z.object({
          inbox_id: inboxId.meta({
            description: "the inbox the message arrived in (`data.inboxId`)",
            example: "support@inbox.example.net",
          }),
        }),
        header: z.object({ "Idempotency-Key": idempotencyKey.optional().meta({ description: "as for POST /v1/events" }) }),
      },
      requestBody: {
        required: true,
        content: {
          "message/rfc822": { schema: z.string().meta({ description: `the raw message, up to ${MESSAGE_LIMIT_BYTES / 1024 / 1024} MiB` }) },
        },
      },
      responses: {
        "200": { description: "a repeat of an Idempotency-Key: the first event", content: json(eventSummarySchema) },
        "201": { description: "accepted", content: json(eventSummarySchema) },
        ...errorResponses({
          409: "the Idempotency-Key was used with another body",
          413: "the raw message is over 10 MiB, or the envelope of its event would be (its text grows in JSON: a control character takes six bytes); nothing was stored",
          415: "the Content-Type is not message/rfc822",
          422: true,
          503: "PostgreSQL is unreachable, or too many raw messages are being processed at once (with `Retry-After`, in seconds); nothing was stored",
        }),
      },
    },
  },
};

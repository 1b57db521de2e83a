import { z } from "zod";
import type { ZodOpenApiPathsObject } from "zod-openapi";
import { EVENT_TYPES, eventDataSchemas } from "@mailhooks/events";
import { resourceId } from "../../routes/webhooks.js";
import { BATCH_MAX_EVENTS, batchItemSchema, batchSchema, eventEnvelopeSchema, idempotencyKey, listQuery } from "../../routes/events.js";
import { replayRequestSchema } from "../../services/replays.js";
import { eventBatchSchema, eventDetailSchema, eventKindName, eventSummarySchema, replayAcceptedSchema } from "../../schemas/events.js";
import { eventListSchema } from "../../schemas/lists.js";
import { errorResponses, JSON_BODY_ERRORS } from "../responses.js";
import { createOperation, json, listOperation } from "./media.js";

/**
 * /v1/events (docs/api.md, "Events"; docs/api.md, "Replay"). The routes validate an event in two steps (the
 * envelope, then `data` against its kind's schema); the document joins the two into one schema
 * per kind, discriminated by `event_type`.
 */

/** One schema per event kind on `base`, its `data` the kind's, discriminated by `event_type`. */
const perKind = (base: z.ZodObject, suffix: string) =>
  z.discriminatedUnion(
    "event_type",
    EVENT_TYPES.map((kind) =>
      base.extend({ event_type: z.literal(kind), data: eventDataSchemas[kind] }).meta({ id: `${eventKindName(kind)}${suffix}` }),
    ) as unknown as [z.ZodObject, ...z.ZodObject[]],
  );

const eventInput = perKind(eventEnvelopeSchema, "EventInput").meta({
  id: "EventInput",
  description: "an email event as the email platform publishes it; `data` follows the kind's table of the specification",
});

const batchItem = perKind(batchItemSchema, "BatchItem").meta({
  id: "EventBatchItem",
  description: "an event of a batch; `idempotency_key` behaves like the Idempotency-Key header of a single POST",
});

const batchInput = batchSchema.extend({ events: z.array(batchItem).min(1).max(BATCH_MAX_EVENTS) }).meta({ id: "EventBatchRequest" });

const idempotencyHeader = {
  header: z.object({
    "Idempotency-Key": idempotencyKey.optional().meta({
      description:
        "printable ASCII, scoped to the account: repeated within 24 h it returns the first event (200) and delivers nothing again; with another body it is 409",
    }),
  }),
};

const eventPath = { path: z.object({ event_id: resourceId.meta({ description: "event id" }) }) };

export const eventPaths: ZodOpenApiPathsObject = {
  "/v1/events": {
    post: createOperation({
      operationId: "createEvent",
      tags: ["Events"],
      summary: "Publish an email event",
      description:
        "Accepted means delivered: the answer follows the commit of the event and of one destination per enabled webhook of the account whose `events` include its kind. Redis being unreachable does not refuse it.",
      idempotency: idempotencyHeader,
      body: eventInput,
      result: eventSummarySchema,
      repeated: "a repeat of an Idempotency-Key: the first event, nothing delivered again",
      created: "accepted",
      conflict: "the Idempotency-Key was used with another body",
    }),
    get: listOperation({
      operationId: "listEvents",
      tags: ["Events"],
      summary: "List events",
      description: "Newest first; `since` (inclusive) and `until` (exclusive) bound `created_at`.",
      query: listQuery,
      page: eventListSchema,
      what: "a page of events",
    }),
  },
  "/v1/events/batch": {
    post: {
      operationId: "createEventBatch",
      tags: ["Events"],
      summary: "Publish up to 500 events at once",
      description: `All or nothing: an invalid item refuses the whole batch with 422, \`details[].path\` like \`events.3.data.from\`. 1 to ${BATCH_MAX_EVENTS} items, answered in request order.`,
      requestBody: { required: true, content: json(batchInput) },
      responses: {
        "201": {
          description: "every item accepted (a repeated idempotency_key returns its first event in its place)",
          content: json(eventBatchSchema),
        },
        ...errorResponses({ ...JSON_BODY_ERRORS, 409: "an item's idempotency_key was used with another body" }),
      },
    },
  },
  "/v1/events/{event_id}": {
    get: {
      operationId: "getEvent",
      tags: ["Events"],
      summary: "Get an event with its payload and destinations",
      requestParams: eventPath,
      responses: { "200": { description: "the event", content: json(eventDetailSchema) }, ...errorResponses({ 404: true, 422: true }) },
    },
  },
  "/v1/events/{event_id}/replay": {
    post: {
      operationId: "replayEvent",
      tags: ["Events"],
      summary: "Replay an event",
      description:
        "Without `target_url`: one replay per destination of the event (or only `webhook_id`'s) whose webhook is enabled, to its current URL. With `target_url`: one replay there, signed with the secret of `webhook_id` or of the event's only destination. Each replay is one attempt, with one delivery row and one audit entry once it ends. The body may be absent. There is no bulk replay: list events and replay each one.",
      requestParams: eventPath,
      requestBody: { required: false, content: json(replayRequestSchema.meta({ id: "ReplayRequest" })) },
      responses: {
        "202": { description: "the replays, accepted", content: json(replayAcceptedSchema) },
        ...errorResponses({
          ...JSON_BODY_ERRORS,
          404: true,
          409: "nothing to replay to: no destination, every destination's webhook disabled or deleted, several destinations and a target_url without webhook_id, or a webhook_id that is not a destination of the event",
          410: true,
        }),
      },
    },
  },
};

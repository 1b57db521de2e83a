import { z } from "zod";
import type { ZodOpenApiPathsObject } from "zod-openapi";
import { idempotencyKey } from "../../routes/events.js";
import { listQuery, resourceId } from "../../routes/webhooks.js";
import { testDeliveryRequestSchema } from "../../services/webhook-health.js";
import { rotateSecretSchema } from "../../services/webhook-secrets.js";
import { createWebhookSchema, updateWebhookSchema } from "../../services/webhook-input.js";
import { webhookListSchema } from "../../schemas/lists.js";
import {
  rotatedSecretSchema,
  testRequestedSchema,
  webhookSchema,
  webhookSecretSchema,
  webhookWithSecretSchema,
} from "../../schemas/webhooks.js";
import { errorResponses, JSON_BODY_ERRORS } from "../responses.js";
import { createOperation, json, listOperation } from "./media.js";

/** /v1/webhooks (docs/api.md, "Webhooks"). */

const path = { path: z.object({ id: resourceId.meta({ description: "webhook id", example: "wh_019a2b3c4d5e7f00a1b2c3d4e5f60718" }) }) };

const createRequest = createWebhookSchema.meta({
  id: "CreateWebhookRequest",
  example: {
    url: "https://example.com/hooks/email",
    events: ["message.delivered", "message.bounced"],
    rate_limit: 50,
    inbox_ids: ["inbox_support"],
    headers: { Authorization: "Bearer gw_3f9c1a7d5e" },
  },
});

const updateRequest = updateWebhookSchema.meta({
  id: "UpdateWebhookRequest",
  example: { events: ["message.sent", "message.delivered"], rate_limit: null, headers: { Authorization: "Bearer gw_8b2e4d6f0a" } },
});

const idempotencyHeader = {
  header: z.object({
    "Idempotency-Key": idempotencyKey.optional().meta({
      description:
        "printable ASCII, scoped to the account: repeated within 24 h with the same body it answers the first webhook (200, its secret included) and sends no second test event; with another body it is 409",
      example: "create-webhook-7d1c2e",
    }),
  }),
};

export const webhookPaths: ZodOpenApiPathsObject = {
  "/v1/webhooks": {
    get: listOperation({
      operationId: "listWebhooks",
      tags: ["Webhooks"],
      summary: "List webhooks",
      description: "The account's webhooks, newest first; deleted ones are not listed. Secrets are never listed.",
      query: listQuery,
      page: webhookListSchema,
      what: "a page of webhooks",
    }),
    post: createOperation({
      operationId: "createWebhook",
      tags: ["Webhooks"],
      summary: "Register a webhook",
      description:
        'Registers an endpoint and queues a test event (`webhook.test`) to it at once. The answer is the only one, with GET /v1/webhooks/{id}/secret, that shows the secret. `rate_limit` (default null: no limit), `inbox_ids` (default null: every inbox) and `headers` (default `{}`; values stored encrypted, answered as `***`) are optional, and so are `secret` (your own, so that your receiver is ready before the test event; default: one made for you) and `signature_scheme` (default `service`). `url: null` with `mode: "listen"` makes a listen webhook: nothing is sent, its deliveries (the test event first) wait until pulled (GET /v1/webhooks/{id}/pending; `npm run listen`).',
      idempotency: idempotencyHeader,
      body: createRequest,
      result: webhookWithSecretSchema,
      repeated: "a repeat of an Idempotency-Key with the same body: the first webhook, its secret included; no second test event",
      created: "registered (status `enabled`)",
      conflict:
        "the account already has MAX_WEBHOOKS_PER_ACCOUNT webhooks; or the Idempotency-Key was used with another body, or its webhook was deleted since",
    }),
  },
  "/v1/webhooks/{id}": {
    get: {
      operationId: "getWebhook",
      tags: ["Webhooks"],
      summary: "Get a webhook",
      requestParams: path,
      responses: { "200": { description: "the webhook", content: json(webhookSchema) }, ...errorResponses({ 404: true, 422: true }) },
    },
    patch: {
      operationId: "updateWebhook",
      tags: ["Webhooks"],
      summary: "Change a webhook",
      description:
        'Changes url, events, status, rate_limit, inbox_ids or headers; an absent field keeps its value. `rate_limit: null` lifts the limit; `inbox_ids: null` means every inbox again (for events accepted after the change); `headers` replaces the whole set (`{}`: none); `signature_scheme` switches how requests are signed from the next request on. The secret is kept and no test event is sent. Disabling cancels the webhook\'s pending deliveries; `status: "enabled"` also turns an auto-disabled webhook back on.',
      requestParams: path,
      requestBody: { required: true, content: json(updateRequest) },
      responses: {
        "200": { description: "the changed webhook", content: json(webhookSchema) },
        ...errorResponses({
          ...JSON_BODY_ERRORS,
          404: true,
          409: '`signature_scheme: "standard"` for a secret made before secrets were standard base64 (URL-safe alphabet): rotate the secret first; a `url` for a listen webhook',
        }),
      },
    },
    delete: {
      operationId: "deleteWebhook",
      tags: ["Webhooks"],
      summary: "Delete a webhook",
      description: "It gets no new deliveries and answers 404 from now on; its history (events, deliveries, audit entries) stays readable.",
      requestParams: path,
      responses: { "204": { description: "deleted" }, ...errorResponses({ 404: true, 422: true }) },
    },
  },
  "/v1/webhooks/{id}/test": {
    post: {
      operationId: "testWebhook",
      tags: ["Webhooks"],
      summary: "Send a test request",
      description:
        "Sends one signed test request now (one attempt, no retry), recorded as a delivery row with `trigger: \"test\"` and `event_id: null`; its `X-Service-Event-Id` is that row's id. Without `event_type` it is the `webhook.test` envelope (`data: {webhookId, url}`); with one of the six kinds, an example envelope of that kind (this document's example data, with a fresh `messageId` ending `@example.invalid`). The body may be absent.",
      requestParams: path,
      requestBody: {
        required: false,
        content: json(testDeliveryRequestSchema.meta({ id: "TestWebhookRequest", example: { event_type: "message.bounced" } })),
      },
      responses: {
        "202": { description: "the test request is on its way", content: json(testRequestedSchema) },
        ...errorResponses({ ...JSON_BODY_ERRORS, 404: true, 409: "the webhook is disabled: enable it first" }),
      },
    },
  },
  "/v1/webhooks/{id}/secret": {
    get: {
      operationId: "getWebhookSecret",
      tags: ["Webhooks"],
      summary: "Get a webhook's signing secret",
      requestParams: path,
      responses: {
        "200": { description: "the secret that signs (or will sign, after a rotation) its requests", content: json(webhookSecretSchema) },
        ...errorResponses({ 404: true, 422: true }),
      },
    },
  },
  "/v1/webhooks/{id}/secret/rotate": {
    post: {
      operationId: "rotateWebhookSecret",
      tags: ["Webhooks"],
      summary: "Rotate a webhook's secret",
      description:
        'Makes a new secret (`whsec_` and standard base64), which signs every request from `activates_at` on; until then the previous one signs. Under `signature_scheme: "service"` a request carries one `sha256=` signature, by whichever secret signs then; under `standard`, both secrets sign during the grace (`v1,<old> v1,<new>`; a previous secret in the URL-safe alphabet is left out). The body may be absent.',
      requestParams: path,
      requestBody: {
        required: false,
        content: json(rotateSecretSchema.meta({ id: "RotateSecretRequest", example: { grace_seconds: 3600 } })),
      },
      responses: {
        "200": { description: "the new secret", content: json(rotatedSecretSchema) },
        ...errorResponses({ ...JSON_BODY_ERRORS, 404: true }),
      },
    },
  },
};

import { z } from "zod";
import type { ZodOpenApiPathsObject } from "zod-openapi";
import { listQuery, resourceId } from "../../routes/webhooks.js";
import { createWebhookSchema, rotateSecretSchema, updateWebhookSchema } from "../../services/webhooks.js";
import { webhookListSchema } from "../../views/lists.js";
import { rotatedSecretSchema, webhookSchema, webhookSecretSchema, webhookWithSecretSchema } from "../../views/webhooks.js";
import { errorResponses, JSON_BODY_ERRORS } from "../responses.js";
import { json } from "./media.js";

/** /v1/webhooks (CONTRACT.md section 4). */

const path = { path: z.object({ id: resourceId.meta({ description: "webhook id" }) }) };

export const webhookPaths: ZodOpenApiPathsObject = {
  "/v1/webhooks": {
    get: {
      operationId: "listWebhooks",
      tags: ["Webhooks"],
      summary: "List webhooks",
      description: "The account's webhooks, newest first; deleted ones are not listed. Secrets are never listed.",
      requestParams: { query: listQuery },
      responses: { "200": { description: "a page of webhooks", content: json(webhookListSchema) }, ...errorResponses({ 422: true }) },
    },
    post: {
      operationId: "createWebhook",
      tags: ["Webhooks"],
      summary: "Register a webhook",
      description: "Registers an endpoint and queues a test event (`webhook.test`) to it at once. The answer is the only one, with GET /v1/webhooks/{id}/secret, that shows the secret.",
      requestBody: { required: true, content: json(createWebhookSchema.meta({ id: "CreateWebhookRequest" })) },
      responses: {
        "201": { description: "registered (status `enabled`)", content: json(webhookWithSecretSchema) },
        ...errorResponses({ ...JSON_BODY_ERRORS, 409: "the account already has MAX_WEBHOOKS_PER_ACCOUNT webhooks" }),
      },
    },
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
        "Changes url, events or status. The secret is kept and no test event is sent. Disabling cancels the webhook's pending deliveries; `status: \"enabled\"` also turns an auto-disabled webhook back on.",
      requestParams: path,
      requestBody: { required: true, content: json(updateWebhookSchema.meta({ id: "UpdateWebhookRequest" })) },
      responses: { "200": { description: "the changed webhook", content: json(webhookSchema) }, ...errorResponses({ ...JSON_BODY_ERRORS, 404: true }) },
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
  "/v1/webhooks/{id}/secret": {
    get: {
      operationId: "getWebhookSecret",
      tags: ["Webhooks"],
      summary: "Get a webhook's signing secret",
      requestParams: path,
      responses: { "200": { description: "the secret that signs (or will sign, after a rotation) its requests", content: json(webhookSecretSchema) }, ...errorResponses({ 404: true, 422: true }) },
    },
  },
  "/v1/webhooks/{id}/secret/rotate": {
    post: {
      operationId: "rotateWebhookSecret",
      tags: ["Webhooks"],
      summary: "Rotate a webhook's secret",
      description:
        "Makes a new secret, which signs every request from `activates_at` on; until then the previous one signs. The wire format never changes (one `sha256=` signature). The body may be absent.",
      requestParams: path,
      requestBody: { required: false, content: json(rotateSecretSchema.meta({ id: "RotateSecretRequest" })) },
      responses: { "200": { description: "the new secret", content: json(rotatedSecretSchema) }, ...errorResponses({ ...JSON_BODY_ERRORS, 404: true }) },
    },
  },
};

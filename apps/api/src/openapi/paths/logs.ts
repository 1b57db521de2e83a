import type { ZodOpenApiPathsObject } from "zod-openapi";
import { querySchema as auditQuery } from "../../routes/audit.js";
import { querySchema as deliveriesQuery } from "../../routes/deliveries.js";
import { auditLogSchema, deliveryListSchema } from "../../schemas/lists.js";
import { errorResponses } from "../responses.js";
import { json } from "./media.js";

/** The deliveries log and the audit log (CONTRACT.md section 8). */
export const logPaths: ZodOpenApiPathsObject = {
  "/v1/deliveries": {
    get: {
      operationId: "listDeliveries",
      tags: ["Logs"],
      summary: "List delivery attempts",
      description: "One row per attempt (initial, each retry, each replay, the test event), newest first.",
      requestParams: { query: deliveriesQuery },
      responses: { "200": { description: "a page of delivery rows", content: json(deliveryListSchema) }, ...errorResponses({ 422: true }) },
    },
  },
  "/v1/audit-log": {
    get: {
      operationId: "listAuditLog",
      tags: ["Logs"],
      summary: "List the audit log",
      description: "One entry per replay attempt: who replayed what, when, to where, and what the receiver answered. Newest `replayed_at` first; `since`/`until` bound it.",
      requestParams: { query: auditQuery },
      responses: { "200": { description: "a page of audit entries", content: json(auditLogSchema) }, ...errorResponses({ 422: true }) },
    },
  },
};

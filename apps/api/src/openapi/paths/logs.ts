import type { ZodOpenApiPathsObject } from "zod-openapi";
import { querySchema as auditQuery } from "../../routes/audit.js";
import { querySchema as deliveriesQuery } from "../../routes/deliveries.js";
import { auditLogSchema, deliveryListSchema } from "../../schemas/lists.js";
import { listOperation } from "./media.js";

/** The deliveries log and the audit log (docs/api.md, "Audit log"). */
export const logPaths: ZodOpenApiPathsObject = {
  "/v1/deliveries": {
    get: listOperation({
      operationId: "listDeliveries",
      tags: ["Logs"],
      summary: "List delivery attempts",
      description: "One row per attempt (initial, each retry, each replay, the test event), newest first.",
      query: deliveriesQuery,
      page: deliveryListSchema,
      what: "a page of delivery rows",
    }),
  },
  "/v1/audit-log": {
    get: listOperation({
      operationId: "listAuditLog",
      tags: ["Logs"],
      summary: "List the audit log",
      description:
        "One entry per replay attempt: who replayed what, when, to where, and what the receiver answered. Newest `replayed_at` first; `since`/`until` bound it.",
      query: auditQuery,
      page: auditLogSchema,
      what: "a page of audit entries",
    }),
  },
};

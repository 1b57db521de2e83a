import { z } from "zod";
import type { ZodOpenApiPathsObject } from "zod-openapi";
import { dashboardLinkSchema } from "../../schemas/dashboard.js";
import { healthSchema, notReadySchema, readySchema } from "../../schemas/health.js";
import { errorResponses, JSON_BODY_ERRORS } from "../responses.js";
import { json } from "./media.js";

/** The dashboard sign-in link (docs/dashboard.md) and the unauthenticated probes (docs/api.md, "Service routes"). */
export const servicePaths: ZodOpenApiPathsObject = {
  "/v1/dashboard-links": {
    post: {
      operationId: "createDashboardLink",
      tags: ["Dashboard"],
      summary: "Make a one-time dashboard sign-in link",
      description:
        "The link works once, within 15 minutes, and becomes a session cookie of the dashboard (`/dashboard`) tied to this API key: revoking the key ends the session, and replays made in the dashboard carry its id in the audit log.",
      // The route takes no field yet: an empty object, or no body at all.
      requestBody: { required: false, content: json(z.strictObject({}).meta({ id: "DashboardLinkRequest" })) },
      responses: { "201": { description: "the link", content: json(dashboardLinkSchema) }, ...errorResponses(JSON_BODY_ERRORS) },
    },
  },
  "/healthz": {
    get: {
      operationId: "getHealth",
      tags: ["Operations"],
      summary: "Liveness: the process is up",
      security: [],
      responses: { "200": { description: "up", content: json(healthSchema) } },
    },
  },
  "/readyz": {
    get: {
      operationId: "getReadiness",
      tags: ["Operations"],
      summary: "Readiness: PostgreSQL is reachable",
      description: "200 while PostgreSQL answers (all accepting needs); the body names the state of PostgreSQL and of Redis.",
      security: [],
      responses: {
        "200": { description: "ready", content: json(readySchema) },
        "503": { description: "`unavailable`: PostgreSQL is unreachable", content: json(notReadySchema) },
      },
    },
  },
  "/metrics": {
    get: {
      operationId: "getMetrics",
      tags: ["Operations"],
      summary: "Prometheus metrics of this API process",
      security: [],
      responses: {
        "200": {
          description: "Prometheus text exposition format",
          content: { "text/plain": { schema: z.string() } },
        },
      },
    },
  },
};

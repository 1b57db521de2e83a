import { createDocument, type oas31 } from "zod-openapi";
import { outboundWebhooks } from "./outbound.js";
import { eventPaths } from "./paths/events.js";
import { inboundPaths } from "./paths/inbound.js";
import { logPaths } from "./paths/logs.js";
import { servicePaths } from "./paths/service.js";
import { pendingPaths } from "./paths/pending.js";
import { webhookPaths } from "./paths/webhooks.js";

/**
 * The OpenAPI 3.1 document of the API (docs/api.md, "A typed client"), generated from the zod schemas
 * that validate the requests (routes/, services/) and from those that type the answers (schemas/).
 * Served at GET /openapi.json; committed as `openapi.json` at the repository root (`npm run
 * openapi` rewrites it, and a test fails when it differs from this function's result).
 */

const DESCRIPTION = `Email event webhooks: register HTTPS endpoints, publish email events, and read what was delivered, retried and replayed.

- Every \`/v1\` call needs \`Authorization: Bearer <API_KEY>\` (\`npm run -s keys -- create --account ACCOUNT --json\` issues one). Each key belongs to one account; another account's resources answer 404.
- JSON bodies and answers, snake_case fields, ISO 8601 UTC timestamps.
- Errors: \`{"error": {"code", "message", "details"?}}\`; \`details\` (validation) lists \`{path, message}\`.
- Lists: \`limit\` (1..100, default 50) and \`cursor\` (the previous page's \`next_cursor\`); newest first.
- Any other path or method answers 404 \`not_found\` in the same error shape (the \`NotFound\` response); under \`/v1\` the key is checked first (401).
- The requests sent to your endpoints are described under \`webhooks\`: a compact JSON envelope signed with HMAC-SHA256.`;

/** Builds the document; pure, so that two calls give the same JSON. */
export function createOpenApiDocument(): oas31.OpenAPIObject {
  return createDocument({
    openapi: "3.1.0",
    info: {
      title: "Email event webhooks API",
      version: "1",
      description: DESCRIPTION,
      license: { name: "MIT", identifier: "MIT" },
    },
    // Relative: the API that serves this document (GET /openapi.json, /docs) is the one it
    // describes. A generated client is given its own base URL (e.g. http://127.0.0.1:3000).
    servers: [{ url: "/", description: "the API serving this document" }],
    tags: [
      { name: "Webhooks", description: "endpoints that receive events" },
      { name: "Events", description: "publishing, reading and replaying email events" },
      { name: "Logs", description: "the deliveries log and the audit log" },
      { name: "Dashboard", description: "sign-in links of the web dashboard" },
      { name: "Operations", description: "health, readiness and metrics (no authentication)" },
    ],
    security: [{ bearerAuth: [] }],
    paths: { ...webhookPaths, ...pendingPaths, ...eventPaths, ...inboundPaths, ...logPaths, ...servicePaths },
    webhooks: outboundWebhooks,
    components: {
      securitySchemes: {
        bearerAuth: { type: "http", scheme: "bearer", description: "an API key of the account: `Authorization: Bearer <API_KEY>`" },
      },
    },
  });
}

/** The document as committed in `openapi.json` at the repository root: 2-space indented, final newline. */
export function openApiFileText(): string {
  return `${JSON.stringify(createOpenApiDocument(), null, 2)}\n`;
}

import { readFile } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import {
  buildOperationalEnvelope,
  OPERATIONAL_DATA_KEYS,
  OPERATIONAL_EVENT_TYPES,
  OPERATIONAL_EXAMPLES,
  SUBSCRIBABLE_EVENT_TYPES,
} from "@mailhooks/events";
import { envelopeSchema, operationalEnvelopeSchemas } from "../schemas/events.js";
import { createOpenApiDocument, openApiFileText } from "./document.js";

const committed = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../../../openapi.json");

describe("the OpenAPI document", () => {
  test("openapi.json at the repository root is the document the schemas generate (run `npm run openapi` after a change)", async () => {
    expect(await readFile(committed, "utf8")).toBe(openApiFileText());
  });

  test("describes every route of the contract with its statuses and the error shape", () => {
    const doc = createOpenApiDocument();
    const operations = Object.entries(doc.paths ?? {}).flatMap(([p, item]) =>
      (["get", "post", "patch", "delete"] as const).filter((m) => item[m]).map((m) => `${m.toUpperCase()} ${p}`),
    );
    expect(operations.sort()).toEqual(
      [
        "GET /v1/webhooks",
        "POST /v1/webhooks",
        "GET /v1/webhooks/{id}",
        "PATCH /v1/webhooks/{id}",
        "DELETE /v1/webhooks/{id}",
        "GET /v1/webhooks/{id}/secret",
        "POST /v1/webhooks/{id}/test",
        "POST /v1/webhooks/{id}/secret/rotate",
        "GET /v1/webhooks/{id}/pending",
        "POST /v1/webhooks/{id}/pending/{delivery_id}",
        "POST /v1/events",
        "GET /v1/events",
        "POST /v1/events/batch",
        "GET /v1/events/{event_id}",
        "POST /v1/events/{event_id}/replay",
        "POST /v1/inboxes/{inbox_id}/messages",
        "GET /v1/deliveries",
        "GET /v1/audit-log",
        "POST /v1/dashboard-links",
        "GET /healthz",
        "GET /readyz",
        "GET /metrics",
      ].sort(),
    );
    expect(doc.openapi).toBe("3.1.0");
    expect(doc.components?.securitySchemes?.bearerAuth).toMatchObject({ type: "http", scheme: "bearer" });
    for (const [p, item] of Object.entries(doc.paths ?? {})) {
      for (const method of ["get", "post", "patch", "delete"] as const) {
        const op = item[method];
        if (!op || !p.startsWith("/v1/")) continue;
        // Every /v1 operation documents the answers any of them can give.
        expect([`${method} ${p}`, Object.keys(op.responses ?? {})]).toEqual([
          `${method} ${p}`,
          expect.arrayContaining(["401", "429", "500", "503"]),
        ]);
      }
    }
    const webhook = doc.components?.schemas?.Webhook as { required: string[] };
    expect(webhook.required).toEqual(expect.arrayContaining(["disabled_reason", "secret_activates_at"]));
    const delivery = doc.components?.schemas?.Delivery as { required: string[] };
    expect(delivery.required).toContain("response_body");
  });

  test("`webhooks` describes every kind a webhook subscribes to and the test event, each operational kind with its envelope and an example", () => {
    const doc = createOpenApiDocument();
    expect(Object.keys(doc.webhooks ?? {}).sort()).toEqual([...SUBSCRIBABLE_EVENT_TYPES, "webhook.test"].sort());
    for (const kind of SUBSCRIBABLE_EVENT_TYPES) {
      const body = doc.webhooks?.[kind]?.post?.requestBody as { content: Record<string, { example?: unknown; schema?: unknown }> };
      const media = body.content["application/json"];
      expect([kind, media.example]).toEqual([kind, expect.objectContaining({ event: kind })]);
      expect(media.schema).toBeDefined();
    }
    for (const kind of OPERATIONAL_EVENT_TYPES) {
      const media = (doc.webhooks?.[kind]?.post?.requestBody as { content: Record<string, { example: unknown; schema: { $ref: string } }> })
        .content["application/json"];
      // The example is what the service sends: the envelope built from the kind's example data.
      const sent = JSON.parse(buildOperationalEnvelope(kind, new Date(1795341600_000), OPERATIONAL_EXAMPLES[kind])) as unknown;
      expect(media.example).toEqual(sent);
      expect(operationalEnvelopeSchemas[kind].parse(media.example)).toEqual(sent);
      expect(envelopeSchema.parse(sent)).toEqual(sent);
      // The schema lists the data's keys in the order the envelope carries them.
      expect(Object.keys(operationalEnvelopeSchemas[kind].shape.data.shape)).toEqual(OPERATIONAL_DATA_KEYS[kind]);
      expect(media.schema.$ref).toMatch(/^#\/components\/schemas\/[A-Za-z]+Envelope$/);
      expect(doc.components?.schemas?.[media.schema.$ref.split("/").pop()!]).toBeDefined();
    }
  });
});

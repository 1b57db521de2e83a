import { Router } from "express";
import { z } from "zod";
import { EVENT_TYPES, eventDataSchemas, type EventType } from "@mailhooks/events";
import type { ApiDeps } from "../deps.js";
import { AppError } from "../errors.js";
import { principalOf } from "../http/auth.js";
import { requireJson } from "../http/body.js";
import { parseOrThrow } from "../http/validate.js";
import { paginationShape, timeWindowShape } from "../http/pagination.js";
import { getEvent, hashBody, ingestEvent, listEvents, type IdempotencyInput, type NewEvent } from "../services/events.js";
import { replayRequestSchema, requestReplay } from "../services/replays.js";
import { resourceId } from "./webhooks.js";

const eventEnvelopeSchema = z.strictObject({
  event_type: z.enum(EVENT_TYPES, { message: `must be one of ${EVENT_TYPES.join(", ")}` }),
  data: z.record(z.string(), z.unknown(), { message: "must be an object" }),
  occurred_at: z.iso.datetime({ offset: true, message: "must be an ISO 8601 timestamp" }).optional(),
});

const listQuery = z.strictObject({
  inbox_id: z.string().min(1).max(200).optional(),
  event_type: z.enum(EVENT_TYPES, { message: `must be one of ${EVENT_TYPES.join(", ")}` }).optional(),
  status: z.enum(["pending", "delivered", "failed"], { message: "must be pending, delivered or failed" }).optional(),
  ...timeWindowShape,
  ...paginationShape,
});

const idempotencyKey = z.string().min(1).max(255).regex(/^[\x21-\x7e]+$/, "must be printable ASCII without spaces");

/** Reads the Idempotency-Key header, if any. @throws AppError validation_error */
export function idempotencyFrom(req: { header(name: string): string | undefined; rawBody?: Buffer }, body: Buffer | undefined): IdempotencyInput | undefined {
  const key = req.header("idempotency-key");
  if (key === undefined) return undefined;
  return { key: parseOrThrow(idempotencyKey, key, "header.Idempotency-Key"), requestHash: hashBody(body ?? Buffer.alloc(0)) };
}

/** Validates `data` against its kind's schema (422 with `data.<field>` paths). */
export function parseEventData(eventType: EventType, data: unknown): NewEvent["data"] {
  return parseOrThrow(eventDataSchemas[eventType], data, "data") as NewEvent["data"];
}

/** /v1/events (CONTRACT.md section 5). */
export function eventsRouter(deps: ApiDeps): Router {
  const router = Router();

  router.post("/", ...requireJson(), async (req, res) => {
    if (req.body === null || typeof req.body !== "object" || Array.isArray(req.body)) {
      throw new AppError("validation_error", "body must be a JSON object", [{ path: "", message: "must be an object" }]);
    }
    const input = parseOrThrow(eventEnvelopeSchema, req.body);
    const data = parseEventData(input.event_type, input.data);
    const occurredAt = input.occurred_at ? new Date(input.occurred_at) : new Date();
    const idem = idempotencyFrom(req, req.rawBody);
    const { event, created } = await ingestEvent(deps, principalOf(req).accountId, { eventType: input.event_type, data, occurredAt }, idem);
    res.status(created ? 201 : 200).json(event);
  });

  router.get("/", async (req, res) => {
    res.json(await listEvents(deps, principalOf(req).accountId, parseOrThrow(listQuery, req.query, "query")));
  });

  router.post("/:id/replay", ...requireJson({ optional: true }), async (req, res) => {
    const id = parseOrThrow(resourceId, req.params.id, "id");
    const input = parseOrThrow(replayRequestSchema, req.body ?? {});
    res.status(202).json(await requestReplay(deps, principalOf(req), id, input));
  });

  router.get("/:id", async (req, res) => {
    res.json(await getEvent(deps, principalOf(req).accountId, parseOrThrow(resourceId, req.params.id, "id")));
  });

  return router;
}

import { Router } from "express";
import { z } from "zod";
import { EVENT_TYPES, eventDataSchemas, type EventType } from "@mailhooks/events";
import type { ApiDeps } from "../deps.js";
import { AppError } from "../errors.js";
import { principalOf } from "../http/auth.js";
import { requireJson } from "../http/body.js";
import { hasNoNul, NO_NUL_MESSAGE, parseOrThrow } from "../http/validate.js";
import { isoTimestamp, paginationShape, timeWindowShape } from "../http/pagination.js";
import { getEvent, hashBody, ingestEvent, listEvents, type IdempotencyInput, type NewEvent } from "../services/events.js";
import { replayRequestSchema, requestReplay } from "../services/replays.js";
import { resourceId } from "./webhooks.js";

const eventEnvelopeSchema = z.strictObject({
  event_type: z.enum(EVENT_TYPES, { message: `must be one of ${EVENT_TYPES.join(", ")}` }),
  data: z.record(z.string(), z.unknown(), { message: "must be an object" }),
  occurred_at: isoTimestamp.optional(),
});

const listQuery = z.strictObject({
  inbox_id: z.string().min(1).max(200).refine(hasNoNul, NO_NUL_MESSAGE).optional(),
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

/** RFC 5322 limits a line, hence a Message-ID, to 998 octets. */
const MESSAGE_ID_MAX_BYTES = 998;

/**
 * Validates `data` against its kind's schema (422 with `data.<field>` paths), then what the
 * events table needs of the fields it stores in columns: no NUL character (PostgreSQL text
 * cannot hold it), and a messageId of at most 998 UTF-8 bytes so that the
 * (account, inbox, message id) index entry stays within PostgreSQL's btree limit; the kind's
 * schema counts UTF-16 units, which lets 998 CJK characters (2994 bytes) through.
 */
export function parseEventData(eventType: EventType, data: unknown): NewEvent["data"] {
  const parsed = parseOrThrow(eventDataSchemas[eventType], data, "data") as NewEvent["data"];
  const details = (["messageId", "threadId", "inboxId"] as const).flatMap((field) =>
    hasNoNul(parsed[field]) ? [] : [{ path: `data.${field}`, message: NO_NUL_MESSAGE }],
  );
  if (Buffer.byteLength(parsed.messageId, "utf8") > MESSAGE_ID_MAX_BYTES) {
    details.push({ path: "data.messageId", message: `must be at most ${MESSAGE_ID_MAX_BYTES} bytes in UTF-8` });
  }
  if (details.length > 0) throw new AppError("validation_error", `${details[0].path}: ${details[0].message}`, details);
  return parsed;
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

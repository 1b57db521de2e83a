import { Router } from "express";
import { z } from "zod";
import {
  ENVELOPE_MAX_BYTES,
  envelopeByteLength,
  EVENT_TYPES,
  eventDataSchemas,
  SUBSCRIBABLE_EVENT_TYPES,
  type EventType,
} from "@mailhooks/events";
import type { ApiDeps } from "../deps.js";
import { AppError, invalidInput, isAppError } from "../errors.js";
import { principalOf } from "../http/auth.js";
import { requireJson } from "../http/body.js";
import { hasNoNul, NO_NUL_MESSAGE, parseOrThrow } from "../http/validate.js";
import { isoTimestamp, paginationShape, timeWindowShape } from "../http/pagination.js";
import {
  eventDetailJson,
  hashBody,
  acceptEvent,
  acceptEvents,
  listEvents,
  readEventDetail,
  type IdempotencyInput,
  type NewEvent,
} from "../services/events.js";
import { replayRequestSchema, requestReplay } from "../services/replays.js";
import { resourceId } from "./webhooks.js";

export const eventEnvelopeSchema = z.strictObject({
  event_type: z.enum(EVENT_TYPES, { message: `must be one of ${EVENT_TYPES.join(", ")}` }),
  data: z.record(z.string(), z.unknown(), { message: "must be an object" }),
  occurred_at: isoTimestamp.optional(),
});

/** The most events one batch may carry (docs/api.md, "Events"). */
export const BATCH_MAX_EVENTS = 500;

export const batchItemSchema = eventEnvelopeSchema.extend({ idempotency_key: z.string().optional() });
export const batchSchema = z.strictObject({
  events: z
    .array(z.unknown(), { message: "must be an array of events" })
    .min(1, "must hold at least one event")
    .max(BATCH_MAX_EVENTS, `must hold at most ${BATCH_MAX_EVENTS} events`),
});

export const listQuery = z.strictObject({
  inbox_id: z.string().min(1).max(200).refine(hasNoNul, NO_NUL_MESSAGE).optional(),
  event_type: z.enum(SUBSCRIBABLE_EVENT_TYPES, { message: `must be one of ${SUBSCRIBABLE_EVENT_TYPES.join(", ")}` }).optional(),
  status: z.enum(["pending", "delivered", "failed"], { message: "must be pending, delivered or failed" }).optional(),
  ...timeWindowShape,
  ...paginationShape,
});

export const idempotencyKey = z
  .string()
  .min(1)
  .max(255)
  .regex(/^[\x21-\x7e]+$/, "must be printable ASCII without spaces");

/** Reads the Idempotency-Key header, if any. @throws AppError validation_error */
export function idempotencyFrom(
  req: { header(name: string): string | undefined; rawBody?: Buffer },
  body: Buffer | undefined,
): IdempotencyInput | undefined {
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
  if (details.length > 0) throw invalidInput(details);
  return parsed;
}

/**
 * Refuses an event whose envelope (the exact bytes stored, signed and sent) would pass 10 MiB
 * (docs/api.md, "Events"), measured without building it; run before `data` is validated, so that
 * a too-large raw message is 413 rather than a 422 on its body's length. Never cuts anything.
 * @throws AppError payload_too_large
 */
export function assertEnvelopeFits(eventType: EventType, occurredAt: Date, data: Record<string, unknown>): void {
  const bytes = envelopeByteLength(eventType, occurredAt, data);
  if (bytes > ENVELOPE_MAX_BYTES) {
    throw new AppError(
      "payload_too_large",
      "envelope_too_large",
      `the event's envelope would take ${bytes} bytes, over the limit of ${ENVELOPE_MAX_BYTES} bytes (10 MiB); nothing was stored`,
    );
  }
}

/**
 * The items of POST /v1/events/batch, each validated as a single POST would be, with every
 * problem reported under `events.<index>.` (all or nothing: one invalid item refuses the batch).
 * An item's `idempotency_key` behaves like the header of a single POST; its request hash is that
 * of the item's JSON. One key twice in a batch is refused.
 * @throws AppError validation_error
 */
function parseBatchItems(items: unknown[]): Parameters<typeof acceptEvents>[2] {
  const details: { path: string; message: string }[] = [];
  const seen = new Set<string>();
  const inputs = items.map((item, index) => {
    try {
      const input = parseOrThrow(batchItemSchema, item, `events.${index}`);
      const occurredAt = input.occurred_at ? new Date(input.occurred_at) : new Date();
      assertEnvelopeFits(input.event_type, occurredAt, input.data);
      const data = withPrefix(() => parseEventData(input.event_type, input.data), `events.${index}`);
      let idempotency: IdempotencyInput | undefined;
      if (input.idempotency_key !== undefined) {
        const key = parseOrThrow(idempotencyKey, input.idempotency_key, `events.${index}.idempotency_key`);
        if (seen.has(key))
          throw new AppError("validation_error", "invalid_input", "duplicate idempotency_key", {
            details: [{ path: `events.${index}.idempotency_key`, message: "is used by an earlier item of this batch" }],
          });
        seen.add(key);
        idempotency = { key, requestHash: hashBody(JSON.stringify(item)) };
      }
      return { eventType: input.event_type, data, occurredAt, ...(idempotency ? { idempotency } : {}) };
    } catch (error) {
      if (isAppError(error, "validation_error")) {
        details.push(...(error.details ?? [{ path: `events.${index}`, message: error.message }]));
        return null;
      }
      throw error;
    }
  });
  if (details.length > 0) throw invalidInput(details);
  return inputs.filter((i) => i !== null);
}

/** Runs `parse`, prefixing the paths of a validation error's details with `prefix`. */
function withPrefix<T>(parse: () => T, prefix: string): T {
  try {
    return parse();
  } catch (error) {
    if (isAppError(error, "validation_error") && error.details) {
      throw new AppError("validation_error", error.reason, error.message, {
        details: error.details.map((d) => ({ path: `${prefix}.${d.path}`, message: d.message })),
      });
    }
    throw error;
  }
}

/** /v1/events (docs/api.md, "Events"). */
export function eventsRouter(deps: ApiDeps): Router {
  const router = Router();

  router.post("/", ...requireJson(), async (req, res) => {
    if (req.body === null || typeof req.body !== "object" || Array.isArray(req.body)) {
      throw new AppError("validation_error", "invalid_input", "body must be a JSON object", {
        details: [{ path: "", message: "must be an object" }],
      });
    }
    const input = parseOrThrow(eventEnvelopeSchema, req.body);
    const occurredAt = input.occurred_at ? new Date(input.occurred_at) : new Date();
    assertEnvelopeFits(input.event_type, occurredAt, input.data);
    const data = parseEventData(input.event_type, input.data);
    const idem = idempotencyFrom(req, req.rawBody);
    const { event, created } = await acceptEvent(deps, principalOf(req).accountId, { eventType: input.event_type, data, occurredAt }, idem);
    res.status(created ? 201 : 200).json(event);
  });

  router.post("/batch", ...requireJson(), async (req, res) => {
    const { events } = parseOrThrow(batchSchema, req.body);
    const inputs = parseBatchItems(events);
    const results = await acceptEvents(deps, principalOf(req).accountId, inputs);
    res.status(201).json({ data: results.map((r) => r.event) });
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
    const detail = await readEventDetail(deps, principalOf(req).accountId, parseOrThrow(resourceId, req.params.id, "id"));
    // The JSON text is built around the stored envelope, which is never parsed (eventDetailJson).
    res.type("json").send(eventDetailJson(detail));
  });

  return router;
}

import { Router } from "express";
import { z } from "zod";
import type { ApiDeps } from "../deps.js";
import { AppError } from "../errors.js";
import { principalOf } from "../http/auth.js";
import { requireRawMessage } from "../http/body.js";
import { measureMessage, messageHeapCost } from "../inbound/message-budget.js";
import { hasNoNul, parseOrThrow } from "../http/validate.js";
import {
  createParseBudget,
  defaultParseBudgetOptions,
  ParseBudgetExhaustedError,
  type ParseBudgetOptions,
} from "../inbound/parse-budget.js";
import { deriveThreadId, MessageTooLargeError, parseRawMessage, UnparseableMessageError } from "../inbound/parse-message.js";
import { acceptEvent, resolveThreadId } from "../services/events.js";
import { assertEnvelopeFits, idempotencyFrom, parseEventData } from "./events.js";

export const inboxId = z
  .string()
  .min(1)
  .max(200)
  .regex(/^[\x21-\x7e]+$/, "must be printable ASCII without spaces");

/**
 * POST /v1/inboxes/{inbox_id}/messages (docs/api.md, "Events"): a raw RFC 5322 message becomes a
 * `message.received` event, or `message.bounced` for a delivery status notification. The memory
 * a message takes is bounded by construction (docs/security.md, "Raw messages and memory"): it is
 * measured before it is parsed (message-budget.ts: lines, header bytes, MIME parts; past their
 * limits 413) and charged the heap it may take, at most MAX_MESSAGE_HEAP_COST (108 MiB for a
 * 10 MiB message), against this process's byte budget (parse-budget.ts): one that finds no room
 * in time is 503 with Retry-After. Its envelope's exact size is computed before the envelope is
 * built: past 10 MiB, 413. Nothing is stored when any of these refuse it.
 */
export function inboundRouter(deps: ApiDeps, budgetOptions: ParseBudgetOptions = defaultParseBudgetOptions()): Router {
  const router = Router();
  const budget = createParseBudget(budgetOptions);

  router.post("/:inboxId/messages", ...requireRawMessage(), async (req, res) => {
    const inbox = parseOrThrow(inboxId, req.params.inboxId, "inbox_id");
    const raw: Buffer = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
    const accountId = principalOf(req).accountId;
    const idempotency = idempotencyFrom(req, raw);
    const shape = await sizeRefusals(() => measureMessage(raw));
    let result;
    try {
      result = await budget.run(messageHeapCost(shape), () => acceptMessage(deps, accountId, inbox, raw, idempotency));
    } catch (error) {
      if (error instanceof ParseBudgetExhaustedError) {
        throw new AppError("unavailable", "parse_capacity", error.message, { headers: { "Retry-After": String(error.retryAfterSeconds) } });
      }
      throw error;
    }
    res.status(result.created ? 201 : 200).json(result.event);
  });

  return router;
}

/** Runs `work`, answering a MessageTooLargeError with 413 payload_too_large. */
async function sizeRefusals<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (error) {
    if (error instanceof MessageTooLargeError)
      throw new AppError("payload_too_large", "message_too_large", `message too large to accept: ${error.message}`);
    throw error;
  }
}

/** Parses `raw` and accepts its event. @throws AppError validation_error, payload_too_large, conflict */
async function acceptMessage(
  deps: ApiDeps,
  accountId: string,
  inbox: string,
  raw: Buffer,
  idempotency: ReturnType<typeof idempotencyFrom>,
) {
  const now = new Date();
  let parsed;
  try {
    parsed = await sizeRefusals(() => parseRawMessage(raw, inbox, now));
  } catch (error) {
    if (error instanceof UnparseableMessageError) {
      throw new AppError("validation_error", "unparseable_message", `not an RFC 5322 message: ${error.message}`, {
        details: [{ path: "body", message: error.message }],
      });
    }
    throw error;
  }
  // An id with a NUL character was never stored (see parseEventData), and PostgreSQL could not even compare it.
  const referencedIds = parsed.referencedIds.filter(hasNoNul);
  const threadId = await resolveThreadId(deps.prisma, accountId, inbox, referencedIds, deriveThreadId(inbox, parsed.threadRootId));
  // Measured before the envelope is built or the body validated: control characters grow six-fold in JSON.
  assertEnvelopeFits(parsed.eventType, now, { ...parsed.data, threadId });
  const data = parseEventData(parsed.eventType, { ...parsed.data, threadId });
  return acceptEvent(deps, accountId, { eventType: parsed.eventType, data, occurredAt: now }, idempotency);
}

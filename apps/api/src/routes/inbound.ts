import { Router } from "express";
import { z } from "zod";
import type { ApiDeps } from "../deps.js";
import { AppError } from "../errors.js";
import { principalOf } from "../http/auth.js";
import { requireRawMessage } from "../http/body.js";
import { hasNoNul, parseOrThrow } from "../http/validate.js";
import { deriveThreadId, parseRawMessage, UnparseableMessageError } from "../inbound/parse-message.js";
import { ingestEvent, resolveThreadId } from "../services/events.js";
import { idempotencyFrom, parseEventData } from "./events.js";

export const inboxId = z.string().min(1).max(200).regex(/^[\x21-\x7e]+$/, "must be printable ASCII without spaces");

/**
 * POST /v1/inboxes/{inbox_id}/messages (CONTRACT.md section 5): a raw RFC 5322 message becomes a
 * `message.received` event, or `message.bounced` for a delivery status notification.
 */
export function inboundRouter(deps: ApiDeps): Router {
  const router = Router();

  router.post("/:inboxId/messages", ...requireRawMessage(), async (req, res) => {
    const inbox = parseOrThrow(inboxId, req.params.inboxId, "inbox_id");
    const raw: Buffer = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
    const now = new Date();
    let parsed;
    try {
      parsed = await parseRawMessage(raw, inbox, now);
    } catch (error) {
      if (error instanceof UnparseableMessageError) {
        throw new AppError("validation_error", `not an RFC 5322 message: ${error.message}`, [{ path: "body", message: error.message }]);
      }
      throw error;
    }
    const accountId = principalOf(req).accountId;
    // An id with a NUL character was never stored (see parseEventData), and PostgreSQL could not even compare it.
    const referencedIds = parsed.referencedIds.filter(hasNoNul);
    const threadId = await resolveThreadId(deps.prisma, accountId, inbox, referencedIds, deriveThreadId(inbox, parsed.threadRootId));
    const data = parseEventData(parsed.eventType, { ...parsed.data, threadId });
    const { event, created } = await ingestEvent(deps, accountId, { eventType: parsed.eventType, data, occurredAt: now }, idempotencyFrom(req, raw));
    res.status(created ? 201 : 200).json(event);
  });

  return router;
}

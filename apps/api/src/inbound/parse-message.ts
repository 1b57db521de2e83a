import { createHash } from "node:crypto";
import type { ParsedMail } from "mailparser";
import type { ReceivedData } from "@mailhooks/events";
import { isDeliveryReport, parseBounce, type ParsedBounce } from "./bounce.js";
import {
  addressesOf,
  firstAddress,
  generateMessageId,
  hasHeaderFields,
  parseMail,
  readThreadHeaders,
  threadLookupIds,
  threadRoot,
  UnparseableMessageError,
} from "./mail.js";

export { MessageTooLargeError, UnparseableMessageError } from "./mail.js";

/**
 * Turns a raw RFC 5322 message posted to `POST /v1/inboxes/{inbox_id}/messages` into the data
 * of a `message.received` event, or of a `message.bounced` event when the message is a
 * delivery status notification (docs/api.md, "Events"; the specification's "Additional data
 * fields per event kind"). MIME decoding and header splitting are left to mailparser; reports
 * are read in bounce.ts.
 */

/** A received message's event data without threadId, and what threading needs (see ParsedInbound). */
export interface ParsedReceived {
  eventType: "message.received";
  data: Omit<ReceivedData, "threadId">;
  referencedIds: string[];
  threadRootId: string;
}

/**
 * The event a raw message becomes: `data` is the packages/events schema's data of its kind
 * WITHOUT threadId (which needs a lookup), and
 * - `referencedIds`: Message-IDs (angle-bracketed, as in headers) this message points at: the
 *   In-Reply-To id and every References id, for a thread lookup; for a bounce, the bounced
 *   message's own id first, then its In-Reply-To/References ids when the report carries them;
 * - `threadRootId`: Message-ID of the thread's root as far as this message alone tells: first id
 *   of References, else In-Reply-To, else the message's own id (for a bounce: the same, from the
 *   bounced message's headers).
 */
export type ParsedInbound = ParsedReceived | ParsedBounce;

/**
 * Parses a raw message (docs/api.md, "Events", `POST /v1/inboxes/{inbox_id}/messages`).
 * Returns a `message.received` description, or `message.bounced` for a delivery status
 * notification that reports at least one failed (or 4.x.x delayed) recipient. `now` is the
 * bounce time of last resort. Throws UnparseableMessageError when the input has no header
 * field at all, MessageTooLargeError when its HTML is too long to render as text.
 */
export async function parseRawMessage(raw: Buffer, inboxId: string, now: Date): Promise<ParsedInbound> {
  const mail = await parseMail(raw);
  if (!hasHeaderFields(mail.headerLines)) {
    throw new UnparseableMessageError(raw.length === 0 ? "empty message" : "no RFC 5322 header field (Name: value) found");
  }
  if (isDeliveryReport(mail)) {
    const bounce = await parseBounce(mail, inboxId, now);
    // A report without a failed recipient (e.g. a "delivered" notice) is not a bounce.
    if (bounce) return bounce;
  }
  return parseReceived(mail, inboxId);
}

/**
 * Thread id of a thread, from its inbox and the Message-ID of its root message:
 * `"thr_"` + the first 24 hex digits of sha256(inboxId + "\n" + rootMessageId). Deterministic,
 * so every message of one thread gets the same id without any lookup (docs/api.md, "Events").
 */
export function deriveThreadId(inboxId: string, rootMessageId: string): string {
  const digest = createHash("sha256").update(`${inboxId}\n${rootMessageId}`, "utf8").digest("hex");
  return `thr_${digest.slice(0, 24)}`;
}

async function parseReceived(mail: ParsedMail, inboxId: string): Promise<ParsedReceived> {
  const thread = readThreadHeaders(mail.headerLines);
  const messageId = thread.messageId || generateMessageId();
  const headers = { ...thread, messageId };
  return {
    eventType: "message.received",
    data: {
      messageId,
      inboxId,
      from: firstAddress(mail.from),
      to: addressesOf(mail.to),
      subject: mail.subject ?? "",
      body: await bodyText(mail),
      headers,
    },
    referencedIds: threadLookupIds(thread.inReplyTo, thread.references),
    threadRootId: threadRoot(headers),
  };
}

/**
 * mailparser renders HTML as text only when the HTML is the root part or sits beside a text
 * part; an HTML-only part nested in multipart/mixed yields no `text`. Re-parsing that HTML
 * as a root text/html message gets the same rendering for it.
 */
async function bodyText(mail: ParsedMail): Promise<string> {
  if (mail.text !== undefined) return mail.text;
  if (typeof mail.html !== "string") return "";
  const asRoot = Buffer.from(`Content-Type: text/html; charset=utf-8\r\n\r\n${mail.html}`, "utf8");
  return (await parseMail(asRoot)).text ?? "";
}

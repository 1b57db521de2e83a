import type { Attachment, HeaderLines, ParsedMail } from "mailparser";
import type { BouncedData } from "@mailhooks/events";
import {
  FIELD_NAME,
  firstAddress,
  generateMessageId,
  hasHeaderFields,
  messageIdsIn,
  parseMail,
  rawHeader,
  readThreadHeaders,
  threadRoot,
  unique,
  type ThreadHeaders,
} from "./mail.js";

/**
 * Delivery status notifications (RFC 3464) posted as raw messages: the data of the
 * `message.bounced` event of the bounced message (docs/api.md, "Events").
 */

/** A bounce's event data without threadId, and what threading needs (see ParsedInbound). */
export interface ParsedBounce {
  eventType: "message.bounced";
  data: Omit<BouncedData, "threadId">;
  referencedIds: string[];
  threadRootId: string;
}

/** One per-recipient block of a `message/delivery-status` part (RFC 3464 section 2.3). */
interface RecipientStatus {
  address: string;
  action: string;
  status: string;
  diagnostic: string;
}

/** What the report tells about the bounced message; every field may be unknown. */
interface OriginalMessage {
  from: string;
  subject: string;
  thread: ThreadHeaders;
}

const DELIVERY_STATUS_TYPES = new Set(["message/delivery-status", "message/global-delivery-status"]);
const ORIGINAL_MESSAGE_TYPES = new Set(["message/rfc822", "text/rfc822-headers", "message/global", "message/global-headers"]);
const STATUS_CODE = /^[245]\.\d{1,3}\.\d{1,3}/;
const BOUNCE_MESSAGE_FALLBACK_LENGTH = 1000;

export function isDeliveryReport(mail: ParsedMail): boolean {
  // mailparser parses Content-Type into { value, params } (lowercased value, raw params).
  const contentType = mail.headers.get("content-type");
  if (!contentType || typeof contentType !== "object" || !("params" in contentType)) return false;
  const reportType = contentType.params["report-type"] ?? "";
  return contentType.value.toLowerCase() === "multipart/report" && reportType.toLowerCase() === "delivery-status";
}

/**
 * The bounce a delivery report tells of, or undefined when it reports no failed (or 4.x.x
 * delayed) recipient. `now` is the bounce time of last resort.
 */
export async function parseBounce(mail: ParsedMail, inboxId: string, now: Date): Promise<ParsedBounce | undefined> {
  const statusPart = mail.attachments.find((a) => DELIVERY_STATUS_TYPES.has(a.contentType.toLowerCase()));
  if (!statusPart) return undefined;
  const blocks = await parseFieldBlocks(statusPart.content);
  // Classified by content rather than position: some MTAs omit the per-message block.
  const perMessage = blocks.find((fields) => !isRecipientBlock(fields));
  const failed = blocks.filter(isRecipientBlock).map(toRecipientStatus).filter(isBounced);
  if (failed.length === 0) return undefined;

  const original = await readOriginal(mail.attachments);
  // messageId must never be empty: without the original's id, the report's own stands in.
  const ownId = readThreadHeaders(mail.headerLines).messageId;
  const messageId = original.thread.messageId || ownId || generateMessageId();
  const first = failed[0];
  return {
    eventType: "message.bounced",
    data: {
      messageId,
      inboxId,
      from: original.from,
      to: unique(failed.map((r) => r.address)),
      subject: original.subject,
      bounceType: first.status.startsWith("4.") ? "soft" : "hard",
      bounceCode: first.status,
      bounceMessage: first.diagnostic || fallbackBounceMessage(mail),
      bouncedAt: bounceTime(perMessage, mail.headerLines, now).toISOString(),
    },
    referencedIds: unique([
      ...messageIdsIn(original.thread.messageId),
      ...messageIdsIn(original.thread.inReplyTo),
      ...messageIdsIn(original.thread.references),
    ]),
    threadRootId: threadRoot({ ...original.thread, messageId }),
  };
}

/**
 * The delivery-status body is a series of header-formatted blocks separated by blank lines
 * (RFC 3464 section 2.1): the per-message fields, then one block per recipient. Each block
 * is handed to mailparser so that folding and field splitting follow RFC 5322.
 */
async function parseFieldBlocks(content: Buffer): Promise<Map<string, string>[]> {
  const blocks = content
    .toString("utf8")
    .split(/\r?\n(?:[ \t]*\r?\n)+/)
    .filter((block) => block.trim() !== "");
  return Promise.all(blocks.map(async (block) => fieldsOf((await parseMail(Buffer.from(block, "utf8"))).headerLines)));
}

/** Field name (lowercase) to its first raw, unfolded value. */
function fieldsOf(lines: HeaderLines): Map<string, string> {
  const fields = new Map<string, string>();
  for (const { key } of lines) {
    if (FIELD_NAME.test(key) && !fields.has(key)) fields.set(key, rawHeader(lines, key) ?? "");
  }
  return fields;
}

function isRecipientBlock(fields: Map<string, string>): boolean {
  return fields.has("final-recipient") || fields.has("original-recipient") || fields.has("action");
}

function toRecipientStatus(fields: Map<string, string>): RecipientStatus {
  const action = (fields.get("action") ?? "").toLowerCase();
  // Status may carry a comment ("5.1.1 (bad mailbox)"); RFC 3464 requires it, but when an MTA
  // leaves it out the action still tells the class (RFC 3463 x.0.0 = "other undefined").
  const status = STATUS_CODE.exec(fields.get("status") ?? "")?.[0] ?? (action === "delayed" ? "4.0.0" : "5.0.0");
  const recipient = fields.get("final-recipient") || fields.get("original-recipient") || "";
  return {
    address: stripAddressType(recipient).replace(/^<(.*)>$/, "$1"),
    action,
    status,
    diagnostic: stripAddressType(fields.get("diagnostic-code") ?? ""),
  };
}

/** A failed recipient, or a delayed one with a transient (4.x.x) status. */
function isBounced(r: RecipientStatus): boolean {
  return r.address !== "" && (r.action === "failed" || (r.action === "delayed" && r.status.startsWith("4.")));
}

/** `rfc822; a@b.c` → `a@b.c`, `smtp; 550 ...` → `550 ...` (RFC 3464 "type ; value" fields). */
function stripAddressType(value: string): string {
  const separator = value.indexOf(";");
  return (separator === -1 ? value : value.slice(separator + 1)).trim();
}

/**
 * The third part of a report is the returned message or just its headers; either way its
 * header section is what identifies the bounced message.
 */
async function readOriginal(attachments: Attachment[]): Promise<OriginalMessage> {
  const unknown: OriginalMessage = { from: "", subject: "", thread: { messageId: "", inReplyTo: "", references: "" } };
  const part = attachments.find((a) => ORIGINAL_MESSAGE_TYPES.has(a.contentType.toLowerCase()));
  if (!part) return unknown;
  const original = await parseMail(part.content);
  if (!hasHeaderFields(original.headerLines)) return unknown;
  return {
    from: firstAddress(original.from),
    subject: original.subject ?? "",
    thread: readThreadHeaders(original.headerLines),
  };
}

function fallbackBounceMessage(mail: ParsedMail): string {
  return (mail.text ?? "").trim().slice(0, BOUNCE_MESSAGE_FALLBACK_LENGTH);
}

/** Arrival-Date of the report, else its Date header, else `now`. */
function bounceTime(perMessage: Map<string, string> | undefined, lines: HeaderLines, now: Date): Date {
  // Not mail.date: mailparser silently substitutes the current time for an unparsable Date.
  return parseDate(perMessage?.get("arrival-date")) ?? parseDate(rawHeader(lines, "date")) ?? now;
}

function parseDate(value: string | undefined): Date | undefined {
  if (!value) return undefined;
  const date = new Date(value);
  return Number.isNaN(date.getTime()) ? undefined : date;
}

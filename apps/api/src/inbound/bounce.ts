import type { Attachment, HeaderLines, ParsedMail } from "mailparser";
import type { BouncedData } from "@mailhooks/events";
import {
  collapseWhitespace,
  FIELD_NAME,
  firstAddress,
  generateMessageId,
  hasHeaderFields,
  messageIdsIn,
  MessageTooLargeError,
  parseMail,
  rawHeader,
  readThreadHeaders,
  threadLookupIds,
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
  const blocks = parseFieldBlocks(statusPart.content);
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
    referencedIds: threadLookupIds(original.thread.inReplyTo, original.thread.references, messageIdsIn(original.thread.messageId)),
    threadRootId: threadRoot({ ...original.thread, messageId }),
  };
}

/**
 * The most field blocks of a delivery-status part: the per-message block and one per recipient,
 * as many as `to` holds (1,000). A report with more is refused (413), never cut short.
 */
export const MAX_STATUS_BLOCKS = 1001;

/**
 * The delivery-status body is a series of header-formatted blocks separated by blank lines
 * (RFC 3464 section 2.1): the per-message fields, then one block per recipient. Each block maps
 * its field names (lowercase) to their first value, unfolded, as rawHeader reads a header. Read
 * in one pass over the lines, keeping only first values: a block may hold any number of fields.
 * @throws MessageTooLargeError past MAX_STATUS_BLOCKS blocks
 */
export function parseFieldBlocks(content: Buffer): Map<string, string>[] {
  const text = content.toString("utf8");
  const blocks: Map<string, string>[] = [];
  let fields: Map<string, string> | null = null;
  // The field being read and the parts of its value (kept only for a name's first field).
  let name = "";
  let parts: string[] | null = null;
  const endField = () => {
    if (fields && parts) fields.set(name, collapseWhitespace(parts.join("\n")));
    parts = null;
  };
  for (let start = 0; start <= text.length;) {
    const end = text.indexOf("\n", start);
    const line = text.slice(start, end === -1 ? text.length : end).replace(/\r$/, "");
    start = end === -1 ? text.length + 1 : end + 1;
    if (/^[ \t]*$/.test(line)) {
      endField();
      fields = null;
      continue;
    }
    if (!fields) {
      if (blocks.length === MAX_STATUS_BLOCKS)
        throw new MessageTooLargeError(`the delivery report has more than ${MAX_STATUS_BLOCKS} field blocks (at most 1000 recipients)`);
      fields = new Map();
      blocks.push(fields);
    }
    if ((line.startsWith(" ") || line.startsWith("\t")) && parts) {
      parts.push(line);
      continue;
    }
    endField();
    const colon = line.indexOf(":");
    name = colon === -1 ? "" : line.slice(0, colon).trim().toLowerCase();
    if (FIELD_NAME.test(name) && !fields.has(name)) parts = [line.slice(colon + 1)];
  }
  endField();
  return blocks.filter((block) => block.size > 0);
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
  // Its header section only: a returned message's body is not needed, and is not parsed twice.
  const original = await parseMail(headerSection(part.content));
  if (!hasHeaderFields(original.headerLines)) return unknown;
  return {
    from: firstAddress(original.from),
    subject: original.subject ?? "",
    thread: readThreadHeaders(original.headerLines),
  };
}

/** `message`'s header section: up to the blank line that ends it (all of it when there is none). */
export function headerSection(message: Buffer): Buffer {
  if (message[0] === 0x0a || (message[0] === 0x0d && message[1] === 0x0a)) return message.subarray(0, 0);
  const ends = [message.indexOf("\n\n"), message.indexOf("\n\r\n")].filter((at) => at !== -1);
  return ends.length === 0 ? message : message.subarray(0, Math.min(...ends) + 1);
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

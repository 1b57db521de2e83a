import { createHash, randomUUID } from "node:crypto";
import { simpleParser, type AddressObject, type Attachment, type HeaderLines, type ParsedMail } from "mailparser";

/**
 * Turns a raw RFC 5322 message posted to `POST /v1/inboxes/{inbox_id}/messages` into the data
 * of a `message.received` event, or of a `message.bounced` event when the message is a
 * delivery status notification (CONTRACT.md section 5; the specification's "Additional data
 * fields per event kind"). MIME decoding and header splitting are left to mailparser.
 */

export interface ParsedInbound {
  eventType: "message.received" | "message.bounced";
  /** data WITHOUT threadId; keys: for received: messageId, inboxId, from, to, subject, body, headers{messageId,inReplyTo,references}; for bounced: messageId, inboxId, from, to, subject, bounceType, bounceCode, bounceMessage, bouncedAt */
  data: Record<string, unknown>;
  /** Message-IDs (angle-bracketed, as in headers) this message points at: the In-Reply-To id and every References id, for a thread lookup; for a bounce, the bounced message's own id first, then its In-Reply-To/References ids when the report carries them. */
  referencedIds: string[];
  /** Message-ID of the thread's root as far as this message alone tells: first id of References, else In-Reply-To, else the message's own id. For a bounce: computed the same way from the bounced message's headers. */
  threadRootId: string;
}

/** Thrown when the input is not an RFC 5322 message at all; the message says why. */
export class UnparseableMessageError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "UnparseableMessageError";
  }
}

/** The three threading headers, raw and unfolded; `""` when absent. */
interface ThreadHeaders {
  messageId: string;
  inReplyTo: string;
  references: string;
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
const ORIGINAL_MESSAGE_TYPES = new Set([
  "message/rfc822",
  "text/rfc822-headers",
  "message/global",
  "message/global-headers",
]);
// RFC 5322 section 2.2: a field name is printable US-ASCII except the colon, no spaces.
const FIELD_NAME = /^[\x21-\x39\x3b-\x7e]+$/;
const STATUS_CODE = /^[245]\.\d{1,3}\.\d{1,3}/;
const BOUNCE_MESSAGE_FALLBACK_LENGTH = 1000;

/**
 * Parses a raw message (CONTRACT.md section 5, `POST /v1/inboxes/{inbox_id}/messages`).
 * Returns a `message.received` description, or `message.bounced` for a delivery status
 * notification that reports at least one failed (or 4.x.x delayed) recipient. `now` is the
 * bounce time of last resort. Throws UnparseableMessageError when the input has no header
 * field at all.
 */
export async function parseRawMessage(raw: Buffer, inboxId: string, now: Date): Promise<ParsedInbound> {
  const mail = await parseMail(raw);
  if (!hasHeaderFields(mail.headerLines)) {
    throw new UnparseableMessageError(
      raw.length === 0 ? "empty message" : "no RFC 5322 header field (Name: value) found",
    );
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
 * so every message of one thread gets the same id without any lookup (CONTRACT.md section 5).
 */
export function deriveThreadId(inboxId: string, rootMessageId: string): string {
  const digest = createHash("sha256").update(`${inboxId}\n${rootMessageId}`, "utf8").digest("hex");
  return `thr_${digest.slice(0, 24)}`;
}

async function parseMail(raw: Buffer): Promise<ParsedMail> {
  try {
    // keepDeliveryStatus: otherwise mailparser appends the delivery-status fields to `text`
    // instead of exposing them as an attachment.
    return await simpleParser(raw, { keepDeliveryStatus: true, skipTextToHtml: true, skipImageLinks: true });
  } catch (err) {
    throw new UnparseableMessageError(`message could not be parsed: ${(err as Error).message}`, { cause: err });
  }
}

/**
 * mailparser reports at least one header line for any input (an empty key for lines
 * without a colon), so a real field is recognised by a well-formed field name.
 */
function hasHeaderFields(lines: HeaderLines): boolean {
  return lines.some(({ key }) => FIELD_NAME.test(key));
}

async function parseReceived(mail: ParsedMail, inboxId: string): Promise<ParsedInbound> {
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
    referencedIds: unique([...messageIdsIn(thread.inReplyTo), ...messageIdsIn(thread.references)]),
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

// --- Delivery status notifications (RFC 3464) ---

function isDeliveryReport(mail: ParsedMail): boolean {
  // mailparser parses Content-Type into { value, params } (lowercased value, raw params).
  const contentType = mail.headers.get("content-type");
  if (!contentType || typeof contentType !== "object" || !("params" in contentType)) return false;
  const reportType = contentType.params["report-type"] ?? "";
  return contentType.value.toLowerCase() === "multipart/report" && reportType.toLowerCase() === "delivery-status";
}

async function parseBounce(mail: ParsedMail, inboxId: string, now: Date): Promise<ParsedInbound | undefined> {
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

// --- Headers, addresses, threading ---

function readThreadHeaders(lines: HeaderLines): ThreadHeaders {
  return {
    messageId: rawHeader(lines, "message-id") ?? "",
    inReplyTo: rawHeader(lines, "in-reply-to") ?? "",
    references: rawHeader(lines, "references") ?? "",
  };
}

/**
 * The value of the first `key` header exactly as written, unfolded: mailparser's decoded
 * values drop or rewrite parts (angle brackets, comments), and the contract wants the
 * message's own text. Header lines come back as binary strings, hence the re-decoding.
 */
function rawHeader(lines: HeaderLines, key: string): string | undefined {
  const header = lines.find((l) => l.key === key);
  if (!header) return undefined;
  const line = Buffer.from(header.line, "latin1").toString("utf8");
  const value = line.slice(line.indexOf(":") + 1);
  return value.replace(/\r?\n(?=[ \t])/g, "").replace(/\s+/g, " ").trim();
}

/** Bare addresses of an address header, groups flattened, unparsable entries dropped. */
function addressesOf(header: AddressObject | AddressObject[] | undefined): string[] {
  const objects = header === undefined ? [] : Array.isArray(header) ? header : [header];
  return objects
    .flatMap((o) => o.value)
    .flatMap((a) => (a.group ? a.group : [a]))
    .map((a) => a.address ?? "")
    .filter((address) => address !== "");
}

function firstAddress(header: AddressObject | AddressObject[] | undefined): string {
  return addressesOf(header)[0] ?? "";
}

function messageIdsIn(value: string): string[] {
  return value.match(/<[^<>]*>/g) ?? [];
}

function threadRoot(headers: ThreadHeaders): string {
  return messageIdsIn(headers.references)[0] ?? messageIdsIn(headers.inReplyTo)[0] ?? headers.messageId;
}

function generateMessageId(): string {
  return `<${randomUUID()}@mailhooks.invalid>`;
}

function unique(values: string[]): string[] {
  return [...new Set(values)];
}

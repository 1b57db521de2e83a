import { randomUUID } from "node:crypto";
import { simpleParser, type AddressObject, type HeaderLines, type ParsedMail } from "mailparser";

/**
 * What the inbound parsers share: mailparser called the one way they need, and reading headers
 * exactly as the message wrote them (docs/api.md, "Events" wants Message-IDs as written).
 */

/** Thrown when the input is not an RFC 5322 message at all; the message says why. */
export class UnparseableMessageError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "UnparseableMessageError";
  }
}

/**
 * The most characters of HTML rendered to text (html-to-text builds a DOM of it: some 40 times
 * its size in heap, synchronously; 5 MiB of dense HTML passes the API's 192 MB heap alone).
 * A message whose body is only longer HTML is refused, never cut: see MessageTooLargeError.
 */
export const HTML_TO_TEXT_MAX_CHARS = 1024 * 1024;

/** A message the service will not turn into an event because of its size (413, nothing stored). */
export class MessageTooLargeError extends Error {
  override name = "MessageTooLargeError";
}

/** The three threading headers, raw and unfolded; `""` when absent. */
export interface ThreadHeaders {
  messageId: string;
  inReplyTo: string;
  references: string;
}

// RFC 5322 section 2.2: a field name is printable US-ASCII except the colon, no spaces.
export const FIELD_NAME = /^[\x21-\x39\x3b-\x7e]+$/;

// keepDeliveryStatus: otherwise mailparser appends the delivery-status fields to `text` instead of
// exposing them as an attachment.
const PARSER_OPTIONS = {
  keepDeliveryStatus: true,
  skipTextToHtml: true,
  skipImageLinks: true,
  maxHtmlLengthToParse: HTML_TO_TEXT_MAX_CHARS,
} as const;

/**
 * Parses a message (or a header block) with mailparser; measure it first (message-budget.ts): its
 * cost in heap grows with its lines and header bytes. @throws UnparseableMessageError, MessageTooLargeError
 */
export async function parseMail(raw: Buffer): Promise<ParsedMail> {
  try {
    return await simpleParser(raw, PARSER_OPTIONS);
  } catch (err) {
    // mailsplit's own limits (a header section over 1 MiB, over 1000 MIME parts): a size refusal.
    if ((err as { code?: unknown }).code === "EMAXLEN")
      throw new MessageTooLargeError(`${(err as Error).message}; nothing was stored`, { cause: err });
    // mailparser refuses HTML over maxHtmlLengthToParse with a plain Error that only its wording
    // tells apart: whether that is what happened is measured instead (rare: only failures pay).
    const htmlLength = await htmlLengthOf(raw);
    if (htmlLength > HTML_TO_TEXT_MAX_CHARS) {
      const message = `its HTML body of ${htmlLength} characters is over the ${HTML_TO_TEXT_MAX_CHARS} that are rendered to text; nothing was stored`;
      throw new MessageTooLargeError(message, { cause: err });
    }
    throw new UnparseableMessageError(`message could not be parsed: ${(err as Error).message}`, { cause: err });
  }
}

/** The characters of HTML of `raw` (mailparser's `html`, without rendering it to text); 0 when it has none or cannot be parsed. */
async function htmlLengthOf(raw: Buffer): Promise<number> {
  try {
    const { html } = await simpleParser(raw, { ...PARSER_OPTIONS, skipHtmlToText: true });
    return typeof html === "string" ? html.length : 0;
  } catch {
    return 0;
  }
}

/**
 * mailparser reports at least one header line for any input (an empty key for lines
 * without a colon), so a real field is recognised by a well-formed field name.
 */
export function hasHeaderFields(lines: HeaderLines): boolean {
  return lines.some(({ key }) => FIELD_NAME.test(key));
}

export function readThreadHeaders(lines: HeaderLines): ThreadHeaders {
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
export function rawHeader(lines: HeaderLines, key: string): string | undefined {
  const header = lines.find((l) => l.key === key);
  if (!header) return undefined;
  const line = Buffer.from(header.line, "latin1").toString("utf8");
  return collapseWhitespace(line.slice(line.indexOf(":") + 1));
}

/** JavaScript's `\s`: ECMAScript WhiteSpace and LineTerminator. */
function isSpace(unit: number): boolean {
  return (
    (unit >= 0x09 && unit <= 0x0d) ||
    unit === 0x20 ||
    unit === 0xa0 ||
    unit === 0x1680 ||
    (unit >= 0x2000 && unit <= 0x200a) ||
    unit === 0x2028 ||
    unit === 0x2029 ||
    unit === 0x202f ||
    unit === 0x205f ||
    unit === 0x3000 ||
    unit === 0xfeff
  );
}

/**
 * `text.replace(/\s+/g, " ").trim()` (which also unfolds a header: a fold is whitespace), in one
 * pass and one copy: V8 builds a global replacement as a list of parts, some tens of bytes per
 * match, and a header value may hold hundreds of thousands of spaces.
 */
export function collapseWhitespace(text: string): string {
  const out = new Uint16Array(text.length);
  let length = 0;
  let space = false;
  for (let i = 0; i < text.length; i++) {
    const unit = text.charCodeAt(i);
    if (isSpace(unit)) {
      space = length > 0;
      continue;
    }
    if (space) out[length++] = 0x20;
    space = false;
    out[length++] = unit;
  }
  let result = "";
  for (let at = 0; at < length; at += 8192) result += String.fromCharCode(...out.subarray(at, Math.min(length, at + 8192)));
  return result;
}

/** Bare addresses of an address header, groups flattened, unparsable entries dropped. */
export function addressesOf(header: AddressObject | AddressObject[] | undefined): string[] {
  const objects = header === undefined ? [] : Array.isArray(header) ? header : [header];
  return objects
    .flatMap((o) => o.value)
    .flatMap((a) => (a.group ? a.group : [a]))
    .map((a) => a.address ?? "")
    .filter((address) => address !== "");
}

export function firstAddress(header: AddressObject | AddressObject[] | undefined): string {
  return addressesOf(header)[0] ?? "";
}

const MESSAGE_ID = /<[^<>]*>/g;

/** Every angle-bracketed Message-ID of `value`, in order. */
export function messageIdsIn(value: string): string[] {
  return value.match(MESSAGE_ID) ?? [];
}

/** The first angle-bracketed Message-ID of `value`, if any. */
function firstMessageId(value: string): string | undefined {
  return /<[^<>]*>/.exec(value)?.[0];
}

/**
 * The most Message-IDs a message's thread is looked up by (MAX_THREAD_LOOKUP_IDS): a References
 * header may list hundreds of thousands, and each would be one value of the lookup's query.
 */
export const MAX_THREAD_LOOKUP_IDS = 100;

/**
 * The distinct Message-IDs a message points at, for the thread lookup, at most
 * MAX_THREAD_LOOKUP_IDS: `first` (a bounce's own), In-Reply-To's, then References' (the first,
 * the thread's root, and the last ones, the nearest ancestors), read without listing them all.
 */
export function threadLookupIds(inReplyTo: string, references: string, first: string[] = []): string[] {
  const last: string[] = [];
  for (const match of references.matchAll(MESSAGE_ID)) {
    last.push(match[0]);
    if (last.length > MAX_THREAD_LOOKUP_IDS) last.splice(1, 1);
  }
  const head = unique([...first, ...messageIdsIn(inReplyTo)]).slice(0, MAX_THREAD_LOOKUP_IDS - 1);
  const all = unique([...head, ...last]);
  if (all.length <= MAX_THREAD_LOOKUP_IDS) return all;
  // The head and the root stay; the oldest of the other ancestors go.
  const kept = head.length + 1;
  return [...all.slice(0, kept), ...all.slice(all.length - (MAX_THREAD_LOOKUP_IDS - kept))];
}

/** Message-ID of the thread's root as far as these headers tell: first of References, else In-Reply-To, else the message's own. */
export function threadRoot(headers: ThreadHeaders): string {
  return firstMessageId(headers.references) ?? firstMessageId(headers.inReplyTo) ?? headers.messageId;
}

export function generateMessageId(): string {
  return `<${randomUUID()}@mailhooks.invalid>`;
}

export function unique(values: string[]): string[] {
  return [...new Set(values)];
}

import type { Transform } from "node:stream";
import mailsplit, { type SplitterChunk } from "@zone-eu/mailsplit";
import { ENVELOPE_MAX_BYTES } from "@mailhooks/events";
import { MessageTooLargeError } from "./mail.js";

/**
 * What a raw message may cost the API's heap while it becomes an event, known before it is parsed
 * (docs/security.md, "Raw messages and memory"). mailparser's cost is not its input's size alone:
 * every line costs some tens of bytes (its chunks and the global replacements over its text, which
 * V8 builds a part by match), and every byte of a header section up to some hundreds (each MIME
 * part's headers are decoded, their address lists parsed, and kept until the end). So a message
 * is measured first, cheaply (its line feeds counted, its MIME structure split without decoding
 * anything), refused with 413 past the limits below, and charged its estimated heap
 * (`messageHeapCost`) against the process's byte budget (parse-budget.ts).
 */

/** The most lines (line feeds) of a raw message: 10 MiB of 40-byte lines; a 10 MiB base64 attachment has about 140,000. */
export const MAX_MESSAGE_LINES = 262_144;
/** The most bytes of header sections, every MIME part's together. */
export const MAX_HEADER_BYTES = 128 * 1024;
/** The most MIME parts (mailsplit's own limit, kept here so that passing it is a 413 too). */
export const MAX_MIME_PARTS = 1000;

/** Heap bytes charged per byte of message: its text (two bytes a character past Latin-1) and its parts. */
const BYTE_COST = 2;
/** Heap bytes charged per byte of envelope: built as one JSON string (two bytes a character at worst) in a buffer that grows. */
const ENVELOPE_BYTE_COST = 4;
/** How much larger than the message its envelope can be: a control byte takes six (`\u0001`). */
const ENVELOPE_GROWTH = 6;
/** Heap bytes charged per line. */
const LINE_COST = 64;
/** Heap bytes charged per byte of header section. */
const HEADER_BYTE_COST = 256;

/** The measures of a raw message that its cost is estimated from. */
export interface MessageShape {
  bytes: number;
  lines: number;
  headerBytes: number;
}

/**
 * The heap, in bytes, charged for turning a message of `shape` into an event: 2 per byte, 4 per
 * byte of its envelope (at most six per byte, at most 10 MiB), 64 per line and 256 per byte of
 * header section. Within the limits above it is at most `MAX_MESSAGE_HEAP_COST`.
 */
export function messageHeapCost({ bytes, lines, headerBytes }: MessageShape): number {
  const envelope = Math.min(ENVELOPE_GROWTH * bytes, ENVELOPE_MAX_BYTES);
  return BYTE_COST * bytes + ENVELOPE_BYTE_COST * envelope + LINE_COST * lines + HEADER_BYTE_COST * headerBytes;
}

/** The per-request budget: the cost of the costliest message the limits let through (108 MiB, for a 10 MiB message). */
export const MAX_MESSAGE_HEAP_COST = messageHeapCost({
  bytes: 10 * 1024 * 1024,
  lines: MAX_MESSAGE_LINES,
  headerBytes: MAX_HEADER_BYTES,
});

/** Line feeds in `raw`. */
export function countLines(raw: Buffer): number {
  let lines = 0;
  for (let at = raw.indexOf(0x0a); at !== -1; at = raw.indexOf(0x0a, at + 1)) lines++;
  return lines;
}

/**
 * Measures `raw` without decoding it: lines, then header bytes of every MIME part (mailsplit, the
 * splitter mailparser itself uses, stopped as soon as a limit is passed).
 * @throws MessageTooLargeError past MAX_MESSAGE_LINES, MAX_HEADER_BYTES or MAX_MIME_PARTS (nothing was parsed)
 */
export async function measureMessage(raw: Buffer): Promise<MessageShape> {
  const lines = countLines(raw);
  if (lines > MAX_MESSAGE_LINES) throw new MessageTooLargeError(`the message has ${lines} lines, over the limit of ${MAX_MESSAGE_LINES}`);
  const headerBytes = await measureHeaders(raw);
  return { bytes: raw.length, lines, headerBytes };
}

const HEADERS_TOO_LARGE = `the message's header sections take more than ${MAX_HEADER_BYTES} bytes (every MIME part's together)`;

/** Parts whose content is a header section that a delivery report's reading parses as one (bounce.ts readOriginal). */
const HEADER_CONTENT_TYPES = new Set(["message/rfc822", "text/rfc822-headers", "message/global-headers", "message/global"]);

/**
 * Header bytes of every MIME part. Counted as header bytes too: the content of a part that holds
 * a message or a header section, up to its blank line, which a delivery report's reading parses
 * as headers; counted twice: the header section of an embedded message that mailsplit splits
 * into parts of its own (an inline message/rfc822), for the same reason.
 */
function measureHeaders(raw: Buffer): Promise<number> {
  return new Promise((resolve, reject) => {
    const splitter = new mailsplit.Splitter({ maxHeadSize: MAX_HEADER_BYTES, maxChildNodes: MAX_MIME_PARTS });
    // Its typings declare only the "data" event; it is a Transform like any other.
    const stream = splitter as unknown as Transform;
    let headerBytes = 0;
    let settled = false;
    // The part whose content is read as headers, and whether the last chunk of it ended a line.
    let headerContent: { node: unknown; lineEnded: boolean } | null = null;
    const add = (bytes: number) => {
      headerBytes += bytes;
      if (headerBytes > MAX_HEADER_BYTES) fail(new MessageTooLargeError(HEADERS_TOO_LARGE));
    };
    const fail = (error: Error) => {
      if (settled) return;
      settled = true;
      splitter.destroy();
      reject(error);
    };
    const done = () => {
      if (settled) return;
      settled = true;
      resolve(headerBytes);
    };
    splitter.on("data", (data: SplitterChunk) => {
      if (data.type === "node") {
        const embedded = data.parentNode && data.parentNode.contentType === "message/rfc822";
        add(data._headerlen * (embedded ? 2 : 1));
        headerContent = HEADER_CONTENT_TYPES.has(String(data.contentType).toLowerCase()) ? { node: data, lineEnded: true } : null;
        return;
      }
      if (!headerContent || data.node !== headerContent.node) return;
      const blank = blankLineEnd(data.value, headerContent.lineEnded);
      add(blank === -1 ? data.value.length : blank);
      if (blank !== -1) headerContent = null;
      else headerContent.lineEnded = data.value[data.value.length - 1] === 0x0a;
    });
    stream.on("error", (error: Error & { code?: string }) => {
      // Anything else mailparser meets the same way, and says why (UnparseableMessageError).
      if (error.code !== "EMAXLEN") return done();
      fail(
        new MessageTooLargeError(
          /child nodes/i.test(error.message) ? `the message has more than ${MAX_MIME_PARTS} MIME parts` : HEADERS_TOO_LARGE,
        ),
      );
    });
    stream.on("end", done);
    splitter.end(raw);
  });
}

/** Where the first blank line of `chunk` starts (`lineEnded`: the chunk starts a line), or -1. */
function blankLineEnd(chunk: Buffer, lineEnded: boolean): number {
  if (lineEnded && (chunk[0] === 0x0a || (chunk[0] === 0x0d && chunk[1] === 0x0a))) return 0;
  const ends = [chunk.indexOf("\n\n"), chunk.indexOf("\n\r\n")].filter((at) => at !== -1);
  return ends.length === 0 ? -1 : Math.min(...ends) + 1;
}

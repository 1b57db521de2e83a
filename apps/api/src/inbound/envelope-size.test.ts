import fc from "fast-check";
import { ENVELOPE_MAX_BYTES, envelopeByteLength, orderEventData, unixSeconds } from "@mailhooks/events";
import { assertEnvelopeFits } from "../routes/events.js";
import { parseRawMessage } from "./parse-message.js";

/**
 * Issue 32 item 2: the size the raw-message route computes before the envelope is built (the
 * 413 decision, assertEnvelopeFits) is the exact byte length of the envelope, for every shape that
 * grows in JSON: control bytes (six bytes each), `"` and `\` (two), lone surrogates (six: only an
 * encoded word can carry one, in the Subject), characters outside the BMP (two UTF-16 units, four
 * bytes), long header folds (in References, which the envelope carries unfolded), and line
 * breaks (CRLF becomes `\n`). fast-check draws the shapes and their sizes, small and around the
 * 10 MiB limit.
 */

const NOW = new Date("2026-12-01T08:00:00.000Z");
const KIB = 1024;

/** A body unit: the bytes of the message that make it, and how many of them. */
const BODY_UNITS = {
  control: Buffer.from([0x01]),
  nul: Buffer.from([0x00]),
  quote: Buffer.from('"'),
  backslash: Buffer.from("\\"),
  crlf: Buffer.from("\r\n"),
  tab: Buffer.from("\t"),
  nonBmp: Buffer.from("😀"),
  cjk: Buffer.from("漢"),
  plain: Buffer.from("a"),
} as const;
type BodyUnit = keyof typeof BODY_UNITS;

interface Shape {
  body: { unit: BodyUnit; count: number }[];
  /** Lone surrogates in an encoded-word Subject (UTF-16LE, which leaves them as they are). */
  loneSurrogates: number;
  /** References folded once per id. */
  foldedReferences: number;
}

function rawMessage(shape: Shape): Buffer {
  const surrogates = Buffer.alloc(shape.loneSurrogates * 2);
  for (let i = 0; i < shape.loneSurrogates; i++) surrogates.writeUInt16LE(0xd800 + (i % 0x800), i * 2);
  const subject = shape.loneSurrogates > 0 ? `=?utf-16le?B?${surrogates.toString("base64")}?=` : "plain";
  const references = Array.from({ length: shape.foldedReferences }, (_, i) => `<r${i}@example.com>`).join("\r\n ");
  const head = [
    "From: Alice <alice@example.com>",
    "To: bob@example.org",
    `Subject: ${subject}`,
    "Message-ID: <m@example.com>",
    ...(references ? [`References: ${references}`] : []),
    "Content-Type: text/plain; charset=utf-8",
    "Content-Transfer-Encoding: 8bit",
    "",
    "",
  ].join("\r\n");
  return Buffer.concat([
    Buffer.from(head, "latin1"),
    ...shape.body.map(({ unit, count }) => Buffer.alloc(count * BODY_UNITS[unit].length, BODY_UNITS[unit])),
  ]);
}

/** What the route checks, and the envelope's actual bytes (built without the 10 MiB refusal). */
async function sizes(shape: Shape): Promise<{ computed: number; actual: number; refused: boolean }> {
  const parsed = await parseRawMessage(rawMessage(shape), "inb_1", NOW);
  const data = { ...parsed.data, threadId: "thr_0123456789abcdef01234567" };
  const computed = envelopeByteLength(parsed.eventType, NOW, data);
  const envelope = { event: parsed.eventType, timestamp: unixSeconds(NOW), data: orderEventData(parsed.eventType, data) };
  const actual = Buffer.from(JSON.stringify(envelope), "utf8").length;
  let refused = false;
  try {
    assertEnvelopeFits(parsed.eventType, NOW, data);
  } catch {
    refused = true;
  }
  return { computed, actual, refused };
}

const unit = fc.constantFrom(...(Object.keys(BODY_UNITS) as BodyUnit[]));

describe("the envelope's size is known exactly before it is built, whatever the message's shape", () => {
  test("small messages of every shape", async () => {
    const shape = fc.record({
      body: fc.array(fc.record({ unit, count: fc.integer({ min: 0, max: 4 * KIB }) }), { maxLength: 6 }),
      loneSurrogates: fc.integer({ min: 0, max: 400 }),
      foldedReferences: fc.integer({ min: 0, max: 200 }),
    });
    await fc.assert(
      fc.asyncProperty(shape, async (s) => {
        const { computed, actual } = await sizes(s);
        expect(computed).toBe(actual);
      }),
      { numRuns: 150 },
    );
  });

  test("around the 10 MiB limit: the 413 decision is the envelope's actual size", async () => {
    // One unit makes most of the envelope; its count puts the envelope within 2 KiB of the limit.
    const JSON_BYTES: Record<BodyUnit, number> = {
      control: 6,
      nul: 6,
      quote: 2,
      backslash: 2,
      crlf: 2,
      tab: 2,
      nonBmp: 4,
      cjk: 3,
      plain: 1,
    };
    const shape = fc
      .record({
        main: unit,
        offset: fc.integer({ min: -2 * KIB, max: 2 * KIB }),
        rest: fc.array(fc.record({ unit, count: fc.integer({ min: 0, max: 64 }) }), { maxLength: 3 }),
        loneSurrogates: fc.integer({ min: 0, max: 100 }),
        foldedReferences: fc.integer({ min: 0, max: 50 }),
      })
      .map(({ main, offset, rest, loneSurrogates, foldedReferences }) => ({
        body: [{ unit: main, count: Math.floor((ENVELOPE_MAX_BYTES - 400 + offset) / JSON_BYTES[main]) }, ...rest],
        loneSurrogates,
        foldedReferences,
      }));
    await fc.assert(
      fc.asyncProperty(shape, async (s) => {
        const { computed, actual, refused } = await sizes(s);
        expect(computed).toBe(actual);
        expect(refused).toBe(actual > ENVELOPE_MAX_BYTES);
      }),
      { numRuns: 12 },
    );
  }, 120_000);
});

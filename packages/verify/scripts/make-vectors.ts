// Writes packages/verify/test-vectors.json: `npm run vectors -w @mailhooks/verify`.
//
// The signatures come from node:crypto's HMAC directly, never from this library or the
// service's signing package, so the tests that check those against the vectors are not
// checking them against themselves. Each expected outcome is written out by hand below.
import { createHmac } from "node:crypto";
import { writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import type { WebhookEnvelope } from "../src/core.js";
import type { TestVector, TestVectorFile, VectorOutcome } from "./vectors.js";
import { VECTORS_PATH } from "./vectors.js";

const NOW = 1795341600; // 2026-11-22T10:00:00Z
const SECRET = "whsec_vectors_9f2c1d7e4b3a";
const OLD_SECRET = "whsec_rotation_old_51e0aa";
const NEW_SECRET = "whsec_rotation_new_c7d344";

/** The signature header for `body` (bytes) at `timestamp` (the header's exact text). */
function sign(secret: string, timestamp: string, body: Buffer): string {
  return (
    "sha256=" +
    createHmac("sha256", Buffer.from(secret, "utf8"))
      .update(Buffer.from(`${timestamp}.`, "utf8"))
      .update(body)
      .digest("hex")
  );
}

const COMMON = {
  messageId: "<m1@example.com>",
  threadId: "thr_1",
  inboxId: "inb_1",
  from: "alice@example.com",
  to: ["bob@example.com"],
  subject: "Hello",
};
const SENT = Buffer.from(JSON.stringify({ event: "message.sent", timestamp: NOW - 5, data: { ...COMMON, status: "sent" } }), "utf8");
const RECEIVED_UTF8 = Buffer.from(
  JSON.stringify({
    event: "message.received",
    timestamp: NOW - 5,
    data: {
      ...COMMON,
      from: "Zoë Ünal <zoe@example.com>",
      subject: "Café ☕ 🎉 Grüße",
      body: "Ça marche — 日本語 ✓",
      headers: { messageId: "<m1@example.com>", inReplyTo: "", references: "" },
    },
  }),
  "utf8",
);
// The text of an email has CRLF line ends; compact JSON carries them escaped as \r\n.
const RECEIVED_CRLF_ESCAPED = Buffer.from(
  JSON.stringify({
    event: "message.received",
    timestamp: NOW - 5,
    data: { ...COMMON, body: "Hi Bob,\r\n\r\nSee you.\r\n", headers: { messageId: "<m1@example.com>", inReplyTo: "", references: "" } },
  }),
  "utf8",
);
// Raw CR LF bytes between JSON tokens (not what the service sends, but JSON all the same): a
// receiver, proxy or framework that normalizes line ends breaks the signature.
const PRETTY_CRLF = Buffer.from(JSON.stringify(JSON.parse(SENT.toString("utf8")), null, 2).replace(/\n/g, "\r\n"), "utf8");
// "Café" in Latin-1: byte 0xE9 alone is not UTF-8.
const LATIN1 = Buffer.concat([
  Buffer.from(`{"event":"message.sent","timestamp":${NOW - 5},"data":{"subject":"Caf`, "utf8"),
  Buffer.from([0xe9]),
  Buffer.from(`"}}`, "utf8"),
]);
// X-Service-Event-Id: the event's id; a test request carries its delivery row's id.
const EVENT_ID = "evt_019a2b3c4d5e7f00a1b2c3d4e5f60718";
const TEST_DELIVERY_ID = "dlv_019a2b3c4d5e7f00a1b2c3d4e5f6071c";
const TEST_EVENT = Buffer.from(
  JSON.stringify({ event: "webhook.test", timestamp: NOW, data: { webhookId: "wh_3b8e", url: "https://receiver.example.com/hooks" } }),
  "utf8",
);

interface Case {
  name: string;
  description: string;
  secrets?: string[];
  /** Who signed (default: the first of `secrets`). */
  signedWith?: string;
  body?: Buffer;
  /** The X-Service-Timestamp sent, as an offset from NOW (default 0) or an exact text. */
  timestamp?: number | string;
  /** Builds the headers from the real timestamp and signature (default: both, canonical case). */
  headers?: (timestamp: string, signature: string) => Record<string, string>;
  /** Signs this body instead of `body` (the sent body was changed after signing). */
  signedBody?: Buffer;
  /** X-Service-Event-Id (default EVENT_ID); null: none. Not signed, so no outcome depends on it. */
  eventId?: string | null;
  tolerance?: number;
  expected: VectorOutcome | "ok";
}

const canonical = (timestamp: string, signature: string) => ({ "X-Service-Timestamp": timestamp, "X-Service-Signature": signature });
const error = (code: Extract<VectorOutcome, { ok: false }>["error"]): VectorOutcome => ({ ok: false, error: code });
const hexOf = (signature: string) => signature.slice("sha256=".length);

const CASES: Case[] = [
  { name: "valid", description: "message.sent signed with the secret, sent now", expected: "ok" },
  {
    name: "valid_lowercase_header_names",
    description: "header names in lowercase, as Node's req.headers has them",
    headers: (t, s) => ({ "x-service-timestamp": t, "x-service-signature": s }),
    expected: "ok",
  },
  {
    name: "valid_uppercase_header_names",
    description: "header names are case-insensitive",
    headers: (t, s) => ({ "X-SERVICE-TIMESTAMP": t, "X-SERVICE-SIGNATURE": s }),
    expected: "ok",
  },
  {
    name: "valid_test_event",
    description: "the webhook.test event sent when a webhook is created",
    body: TEST_EVENT,
    eventId: TEST_DELIVERY_ID,
    expected: "ok",
  },
  {
    name: "valid_non_ascii_utf8_body",
    description: "non-ASCII text (accents, CJK, emoji) is signed as its UTF-8 bytes",
    body: RECEIVED_UTF8,
    expected: "ok",
  },
  { name: "valid_non_ascii_secret", description: "the HMAC key is the secret's UTF-8 bytes", secrets: ["clé_secrète_🔑"], expected: "ok" },
  {
    name: "valid_crlf_escaped_in_json",
    description: "an email body with CRLF line ends, escaped as \\r\\n inside the JSON string",
    body: RECEIVED_CRLF_ESCAPED,
    expected: "ok",
  },
  {
    name: "valid_crlf_bytes_between_tokens",
    description: "raw CR LF bytes in the body are signed as they are",
    body: PRETTY_CRLF,
    expected: "ok",
  },
  {
    name: "crlf_converted_to_lf",
    description: "the body of valid_crlf_bytes_between_tokens with CRLF turned into LF after signing",
    body: Buffer.from(PRETTY_CRLF.toString("utf8").replace(/\r\n/g, "\n"), "utf8"),
    signedBody: PRETTY_CRLF,
    expected: error("invalid_signature"),
  },
  {
    name: "tampered_body",
    description: "one byte of the body changed after signing",
    body: Buffer.from(SENT.toString("utf8").replace('"sent"}', '"SENT"}'), "utf8"),
    signedBody: SENT,
    expected: error("invalid_signature"),
  },
  {
    name: "reserialized_body",
    description: "the body parsed and serialized again with spaces: other bytes",
    body: Buffer.from(JSON.stringify(JSON.parse(SENT.toString("utf8")), null, 1), "utf8"),
    signedBody: SENT,
    expected: error("invalid_signature"),
  },
  {
    name: "tampered_timestamp",
    description: "X-Service-Timestamp changed by one second after signing (still within tolerance)",
    headers: (t, s) => canonical(String(Number(t) - 1), s),
    expected: error("invalid_signature"),
  },
  {
    name: "wrong_secret",
    description: "signed with another webhook's secret",
    signedWith: "whsec_someone_else_000",
    expected: error("invalid_signature"),
  },
  {
    name: "expired",
    description: "sent 301 s before now, with a tolerance of 300 s",
    timestamp: -301,
    expected: error("timestamp_out_of_tolerance"),
  },
  { name: "oldest_accepted", description: "sent exactly 300 s before now: the window is inclusive", timestamp: -300, expected: "ok" },
  {
    name: "future",
    description: "sent 301 s after now (the sender's clock is ahead)",
    timestamp: 301,
    expected: error("timestamp_out_of_tolerance"),
  },
  { name: "latest_accepted", description: "sent exactly 300 s after now", timestamp: 300, expected: "ok" },
  {
    name: "custom_tolerance",
    description: "an hour old, accepted with a tolerance of two hours",
    timestamp: -3600,
    tolerance: 7200,
    expected: "ok",
  },
  {
    name: "zero_tolerance_other_second",
    description: "a tolerance of 0 s accepts only the same second",
    timestamp: -1,
    tolerance: 0,
    expected: error("timestamp_out_of_tolerance"),
  },
  {
    name: "missing_signature_header",
    description: "no X-Service-Signature",
    headers: (t) => ({ "X-Service-Timestamp": t }),
    expected: error("missing_header"),
  },
  {
    name: "missing_timestamp_header",
    description: "no X-Service-Timestamp",
    headers: (_t, s) => ({ "X-Service-Signature": s }),
    expected: error("missing_header"),
  },
  {
    name: "missing_both_headers",
    description: "neither header (a request from elsewhere)",
    headers: () => ({}),
    eventId: null,
    expected: error("missing_header"),
  },
  {
    name: "empty_signature_header",
    description: "X-Service-Signature present but empty",
    headers: (t) => ({ "X-Service-Timestamp": t, "X-Service-Signature": "" }),
    expected: error("missing_header"),
  },
  {
    name: "empty_timestamp_header",
    description: "X-Service-Timestamp present but empty",
    headers: (_t, s) => ({ "X-Service-Timestamp": "", "X-Service-Signature": s }),
    expected: error("missing_header"),
  },
  {
    name: "timestamp_in_milliseconds",
    description: "13 digits: milliseconds instead of seconds",
    timestamp: `${NOW}000`,
    expected: error("invalid_timestamp"),
  },
  {
    name: "timestamp_with_fraction",
    description: "decimal seconds are not Unix seconds",
    timestamp: `${NOW}.5`,
    expected: error("invalid_timestamp"),
  },
  { name: "timestamp_negative", description: "a sign is not a digit", timestamp: `-${NOW}`, expected: error("invalid_timestamp") },
  {
    name: "timestamp_exponent",
    description: "JSON-style number notation is not accepted",
    timestamp: "1.7953416e9",
    expected: error("invalid_timestamp"),
  },
  {
    name: "timestamp_iso_8601",
    description: "a date is not Unix seconds",
    timestamp: "2026-11-22T10:00:00Z",
    expected: error("invalid_timestamp"),
  },
  {
    name: "uppercase_hex",
    description: "the right signature in uppercase hex: the format is lowercase hex only, so it is refused",
    headers: (t, s) => canonical(t, `sha256=${hexOf(s).toUpperCase()}`),
    expected: error("invalid_signature"),
  },
  {
    name: "uppercase_prefix",
    description: "SHA256= instead of sha256=",
    headers: (t, s) => canonical(t, `SHA256=${hexOf(s)}`),
    expected: error("invalid_signature"),
  },
  {
    name: "missing_prefix",
    description: "the hex digest without sha256=",
    headers: (t, s) => canonical(t, hexOf(s)),
    expected: error("invalid_signature"),
  },
  {
    name: "other_algorithm_prefix",
    description: "sha1= with the sha256 digest",
    headers: (t, s) => canonical(t, `sha1=${hexOf(s)}`),
    expected: error("invalid_signature"),
  },
  {
    name: "truncated_signature",
    description: "the last hex digit missing",
    headers: (t, s) => canonical(t, s.slice(0, -1)),
    expected: error("invalid_signature"),
  },
  {
    name: "signature_with_extra_digits",
    description: "two hex digits appended",
    headers: (t, s) => canonical(t, `${s}00`),
    expected: error("invalid_signature"),
  },
  {
    name: "repeated_signature_header",
    description: "the header sent twice, joined by a comma as HTTP stacks join it",
    headers: (t, s) => canonical(t, `${s}, ${s}`),
    expected: error("invalid_signature"),
  },
  {
    name: "non_utf8_body",
    description: "bytes that are not UTF-8 (Latin-1 é), signed correctly: the signature holds, the body is not a valid payload",
    body: LATIN1,
    expected: error("invalid_payload"),
  },
  {
    name: "rotation_signed_with_new",
    description: "a receiver holding the old and the new secret; signed with the new one",
    secrets: [OLD_SECRET, NEW_SECRET],
    signedWith: NEW_SECRET,
    expected: "ok",
  },
  {
    name: "rotation_signed_with_old",
    description: "a receiver holding the old and the new secret; signed with the old one (before activates_at)",
    secrets: [OLD_SECRET, NEW_SECRET],
    signedWith: OLD_SECRET,
    expected: "ok",
  },
  {
    name: "rotation_order_does_not_matter",
    description: "the secrets in the other order",
    secrets: [NEW_SECRET, OLD_SECRET],
    signedWith: OLD_SECRET,
    expected: "ok",
  },
  {
    name: "rotation_signed_with_neither",
    description: "two secrets held, signed with a third",
    secrets: [OLD_SECRET, NEW_SECRET],
    signedWith: SECRET,
    expected: error("invalid_signature"),
  },
  {
    name: "order_timestamp_before_signature",
    description: "expired and signed with a wrong secret: the timestamp is checked first",
    timestamp: -3600,
    signedWith: "whsec_someone_else_000",
    expected: error("timestamp_out_of_tolerance"),
  },
  {
    name: "order_format_before_signature",
    description: "a malformed timestamp and a wrong signature: the timestamp's format is checked first",
    timestamp: "soon",
    signedWith: "whsec_someone_else_000",
    expected: error("invalid_timestamp"),
  },
  {
    name: "payload_not_json",
    description: "a correctly signed body that is not JSON",
    body: Buffer.from("ok", "utf8"),
    expected: error("invalid_payload"),
  },
  { name: "payload_empty", description: "a correctly signed empty body", body: Buffer.alloc(0), expected: error("invalid_payload") },
  {
    name: "payload_json_array",
    description: "correctly signed JSON that is not an object",
    body: Buffer.from('[{"event":"message.sent"}]', "utf8"),
    expected: error("invalid_payload"),
  },
  {
    name: "payload_without_data",
    description: "an object without data",
    body: Buffer.from(`{"event":"message.sent","timestamp":${NOW}}`, "utf8"),
    expected: error("invalid_payload"),
  },
  {
    name: "payload_timestamp_as_text",
    description: "timestamp must be a JSON number",
    body: Buffer.from(`{"event":"message.sent","timestamp":"${NOW}","data":{}}`, "utf8"),
    expected: error("invalid_payload"),
  },
  {
    name: "payload_utf8_bom",
    description: "a UTF-8 byte order mark before the JSON (JSON parsers refuse it)",
    body: Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), SENT]),
    expected: error("invalid_payload"),
  },
];

function toVector(c: Case): TestVector {
  const secrets = c.secrets ?? [SECRET];
  const body = c.body ?? SENT;
  const timestamp = typeof c.timestamp === "string" ? c.timestamp : String(NOW + (c.timestamp ?? 0));
  const signature = sign(c.signedWith ?? secrets[0], timestamp, c.signedBody ?? body);
  const expected: VectorOutcome =
    c.expected === "ok" ? { ok: true, envelope: JSON.parse(body.toString("utf8")) as WebhookEnvelope } : c.expected;
  return {
    name: c.name,
    description: c.description,
    secrets,
    headers: withEventId((c.headers ?? canonical)(timestamp, signature), c.eventId === undefined ? EVENT_ID : c.eventId),
    body_base64: body.toString("base64"),
    now: NOW,
    tolerance_seconds: c.tolerance ?? 300,
    expected,
  };
}

/** Adds X-Service-Event-Id, its name in the case of the other headers (lowercase, uppercase or canonical). */
function withEventId(headers: Record<string, string>, eventId: string | null): Record<string, string> {
  if (eventId === null) return headers;
  const names = Object.keys(headers);
  const name =
    names.length > 0 && names.every((n) => n === n.toLowerCase())
      ? "x-service-event-id"
      : names.length > 0 && names.every((n) => n === n.toUpperCase())
        ? "X-SERVICE-EVENT-ID"
        : "X-Service-Event-Id";
  return { ...headers, [name]: eventId };
}

/** The whole file, as written. */
export function buildVectorFile(): TestVectorFile {
  return {
    description:
      "Requests as a webhook receiver sees them, and the outcome every implementation must reach. " +
      "Signed message: the exact X-Service-Timestamp text, '.', then the body's bytes; HMAC-SHA256 keyed with the UTF-8 bytes " +
      "of a secret; X-Service-Signature is 'sha256=' + 64 lowercase hex digits (uppercase is refused). Header names are " +
      "case-insensitive. A request passes when any one of `secrets` matches. Bodies are base64 so that their bytes are exact. " +
      "X-Service-Event-Id (the event's id, the key to de-duplicate on) is not signed: it changes no outcome here, " +
      "but a receiver that de-duplicates refuses a request without it (missing_header).",
    checks_in_order: [
      "missing_header: X-Service-Timestamp or X-Service-Signature absent or empty (for a receiver that de-duplicates, X-Service-Event-Id too)",
      "invalid_timestamp: X-Service-Timestamp is not 1 to 12 ASCII digits",
      "timestamp_out_of_tolerance: |now - timestamp| > tolerance_seconds",
      "invalid_signature: not 'sha256=' + 64 lowercase hex digits, or no secret gives that HMAC",
      "invalid_payload: the body is not UTF-8 JSON (no BOM) of an object with event (string), timestamp (number), data (object)",
    ],
    vectors: CASES.map(toVector),
  };
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  writeFileSync(VECTORS_PATH, JSON.stringify(buildVectorFile(), null, 2) + "\n");
  console.log(`wrote ${fileURLToPath(VECTORS_PATH)}`);
}

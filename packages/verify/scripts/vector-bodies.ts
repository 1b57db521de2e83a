// The secrets, the bodies and the shape of a case of packages/verify/test-vectors.json
// (make-vectors.ts writes it). The signatures come from node:crypto's HMAC directly, never from
// this library or the service's signing package.
import { createHmac } from "node:crypto";
import type { VectorOutcome } from "./vectors.js";

export const NOW = 1795341600; // 2026-11-22T10:00:00Z
export const SECRET = "whsec_vectors_9f2c1d7e4b3a";
export const OLD_SECRET = "whsec_rotation_old_51e0aa";
export const NEW_SECRET = "whsec_rotation_new_c7d344";

/** The signature header for `body` (bytes) at `timestamp` (the header's exact text). */
export function sign(secret: string, timestamp: string, body: Buffer): string {
  return (
    "sha256=" +
    createHmac("sha256", Buffer.from(secret, "utf8"))
      .update(Buffer.from(`${timestamp}.`, "utf8"))
      .update(body)
      .digest("hex")
  );
}

export const COMMON = {
  messageId: "<m1@example.com>",
  threadId: "thr_1",
  inboxId: "inb_1",
  from: "alice@example.com",
  to: ["bob@example.com"],
  subject: "Hello",
};
export const SENT = Buffer.from(JSON.stringify({ event: "message.sent", timestamp: NOW - 5, data: { ...COMMON, status: "sent" } }), "utf8");
export const RECEIVED_UTF8 = Buffer.from(
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
export const RECEIVED_CRLF_ESCAPED = Buffer.from(
  JSON.stringify({
    event: "message.received",
    timestamp: NOW - 5,
    data: { ...COMMON, body: "Hi Bob,\r\n\r\nSee you.\r\n", headers: { messageId: "<m1@example.com>", inReplyTo: "", references: "" } },
  }),
  "utf8",
);
// Raw CR LF bytes between JSON tokens (not what the service sends, but JSON all the same): a
// receiver, proxy or framework that normalizes line ends breaks the signature.
export const PRETTY_CRLF = Buffer.from(JSON.stringify(JSON.parse(SENT.toString("utf8")), null, 2).replace(/\n/g, "\r\n"), "utf8");
// "Café" in Latin-1: byte 0xE9 alone is not UTF-8.
export const LATIN1 = Buffer.concat([
  Buffer.from(`{"event":"message.sent","timestamp":${NOW - 5},"data":{"subject":"Caf`, "utf8"),
  Buffer.from([0xe9]),
  Buffer.from(`"}}`, "utf8"),
]);
// X-Service-Event-Id: the event's id; a test request carries its delivery row's id.
export const EVENT_ID = "evt_019a2b3c4d5e7f00a1b2c3d4e5f60718";
export const TEST_DELIVERY_ID = "dlv_019a2b3c4d5e7f00a1b2c3d4e5f6071c";
export const TEST_EVENT = Buffer.from(
  JSON.stringify({ event: "webhook.test", timestamp: NOW, data: { webhookId: "wh_3b8e", url: "https://receiver.example.com/hooks" } }),
  "utf8",
);

export interface Case {
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

export const canonical = (timestamp: string, signature: string) => ({ "X-Service-Timestamp": timestamp, "X-Service-Signature": signature });
export const error = (code: Extract<VectorOutcome, { ok: false }>["error"]): VectorOutcome => ({ ok: false, error: code });
export const hexOf = (signature: string) => signature.slice("sha256=".length);

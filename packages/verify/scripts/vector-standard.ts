// The Standard Webhooks cases of packages/verify/test-vectors.json (`signature_scheme:
// "standard"`), each expected outcome written out by hand; make-vectors.ts writes them under
// `standard`. The signatures come from node:crypto's HMAC directly, never from this library, the
// service's signing package or the official standardwebhooks library.
import { createHmac } from "node:crypto";
import type { WebhookEnvelope } from "../src/core.js";
import type { TestVector, VectorOutcome } from "./vectors.js";
import { error, EVENT_ID, LATIN1, NOW, RECEIVED_UTF8, SENT, TEST_DELIVERY_ID, TEST_EVENT } from "./vector-bodies.js";

// `whsec_` and the standard base64 of 32 bytes (24 and 64 for the shortest and longest a caller
// may choose), as the service makes them: each holds a `+` or a `/`, outside the URL-safe alphabet.
export const STD_SECRET = "whsec_Bph43y3bUSBzCJKSxrdLw6AmXs2pGzck3G/eGZJ6Gss=";
export const STD_OLD = "whsec_THoFbpaRwCiYfwZ/bS57MFFLPeR2k+ZnG50jKvlftEo=";
export const STD_NEW = "whsec_mpZO4oC/EYICY2T/FeGh5OCf0Y8y/e0PHLgIKWxpTz0=";
export const STD_SHORT = "whsec_6aRmjrGO7NlmkXXfAHw+KVzZmffaGxdz";
export const STD_LONG = "whsec_YCLvxA/fKlj74K5p3dqqQ941Katol5yzTc2AVDKF5/F3w9TjIenW0htAdxUbeWC/3V6dRlT9ejA6YedOPP8bhQ==";
const STD_OTHER = "whsec_+WC7ImIc+D6vljgwugBbrIBBt3SWEoCkINiadoD8IhQ=";

/** The specification's own example (https://www.standardwebhooks.com): its signature is known. */
const SPEC_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const SPEC_ID = "msg_p5jXN8AQM9LWM0D4loKWxJek";
const SPEC_TIMESTAMP = "1614265330";
const SPEC_BODY = Buffer.from('{"test": 2432232314}', "utf8");

/** `v1,<base64 HMAC-SHA256>` of `<id>.<timestamp>.<body>`, keyed with the secret's decoded base64. */
export function signStandardVector(secret: string, id: string, timestamp: string, body: Buffer): string {
  const key = Buffer.from(secret.replace(/^whsec_/, ""), "base64");
  const mac = createHmac("sha256", key)
    .update(Buffer.from(`${id}.${timestamp}.`, "utf8"))
    .update(body)
    .digest("base64");
  return `v1,${mac}`;
}

interface StandardCase {
  name: string;
  description: string;
  secrets?: string[];
  /** Who signed, in the header's order (default: the first of `secrets`). */
  signedWith?: string[];
  body?: Buffer;
  /** webhook-timestamp, as an offset from NOW (default 0) or an exact text. */
  timestamp?: number | string;
  /** webhook-id (default EVENT_ID). */
  id?: string;
  /** Signs this body (the sent body was changed after signing). */
  signedBody?: Buffer;
  /** Signs this id (webhook-id was changed after signing). */
  signedId?: string;
  /** Builds the headers from the id, the timestamp and the signature header (default: `standard`). */
  headers?: (id: string, timestamp: string, signature: string) => Record<string, string>;
  tolerance?: number;
  expected: VectorOutcome | "ok";
}

/** The headers the service sends under `standard`: the three of the specification, and X-Service-Event-Id with the same id. */
const standard = (id: string, timestamp: string, signature: string): Record<string, string> => ({
  "webhook-id": id,
  "webhook-timestamp": timestamp,
  "webhook-signature": signature,
  "X-Service-Event-Id": id,
});

const CASES: StandardCase[] = [
  { name: "valid", description: "message.sent signed with the secret, sent now", expected: "ok" },
  {
    name: "valid_canonical_case_header_names",
    description: "header names are case-insensitive",
    headers: (i, t, s) => ({ "Webhook-Id": i, "Webhook-Timestamp": t, "Webhook-Signature": s }),
    expected: "ok",
  },
  {
    name: "valid_test_event",
    description: "the webhook.test event; its id is its delivery row's",
    body: TEST_EVENT,
    id: TEST_DELIVERY_ID,
    expected: "ok",
  },
  { name: "valid_non_ascii_utf8_body", description: "non-ASCII text is signed as its UTF-8 bytes", body: RECEIVED_UTF8, expected: "ok" },
  { name: "valid_secret_of_24_bytes", description: "the shortest secret a caller may choose", secrets: [STD_SHORT], expected: "ok" },
  { name: "valid_secret_of_64_bytes", description: "the longest secret a caller may choose", secrets: [STD_LONG], expected: "ok" },
  {
    name: "valid_secret_without_prefix",
    description: "a receiver may hold the secret without whsec_: the key is the same bytes",
    secrets: [STD_SECRET.slice("whsec_".length)],
    expected: "ok",
  },
  {
    name: "rotation_both_sign_receiver_holds_old",
    description: "during a rotation's grace both secrets sign (v1,<old> v1,<new>); a receiver holding the old one only",
    secrets: [STD_OLD],
    signedWith: [STD_OLD, STD_NEW],
    expected: "ok",
  },
  {
    name: "rotation_both_sign_receiver_holds_new",
    description: "during a rotation's grace both secrets sign; a receiver that has switched to the new one",
    secrets: [STD_NEW],
    signedWith: [STD_OLD, STD_NEW],
    expected: "ok",
  },
  {
    name: "rotation_both_sign_receiver_holds_both",
    description: "during a rotation's grace both secrets sign; a receiver holding both",
    secrets: [STD_NEW, STD_OLD],
    signedWith: [STD_OLD, STD_NEW],
    expected: "ok",
  },
  {
    name: "rotation_signed_with_neither",
    description: "two signatures, by neither of the secrets held",
    secrets: [STD_SECRET],
    signedWith: [STD_OLD, STD_NEW],
    expected: error("invalid_signature"),
  },
  {
    name: "unknown_version_skipped",
    description: "a signature of another version (v1a, asymmetric) before the v1 one is skipped",
    headers: (i, t, s) => standard(i, t, `v1a,${Buffer.alloc(64, 7).toString("base64")} ${s}`),
    expected: "ok",
  },
  {
    name: "only_unknown_versions",
    description: "no v1 signature at all",
    headers: (i, t, s) => standard(i, t, s.replace(/^v1,/, "v2,")),
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
    name: "tampered_id",
    description: "webhook-id changed after signing: the id is part of the signed message",
    signedId: "evt_019a2b3c4d5e7f00a1b2c3d4e5f60719",
    expected: error("invalid_signature"),
  },
  {
    name: "tampered_timestamp",
    description: "webhook-timestamp changed by one second after signing",
    headers: (i, t, s) => standard(i, String(Number(t) - 1), s),
    expected: error("invalid_signature"),
  },
  {
    name: "wrong_secret",
    description: "signed with another webhook's secret",
    signedWith: [STD_OTHER],
    expected: error("invalid_signature"),
  },
  {
    name: "keyed_with_the_secret_text",
    description: "HMAC keyed with the secret's UTF-8 text (as the service scheme is) instead of its decoded base64",
    headers: (i, t) =>
      standard(i, t, `v1,${createHmac("sha256", Buffer.from(STD_SECRET, "utf8")).update(`${i}.${t}.`).update(SENT).digest("base64")}`),
    expected: error("invalid_signature"),
  },
  {
    name: "hex_instead_of_base64",
    description: "v1, followed by the right MAC in hex",
    headers: (i, t, s) => standard(i, t, `v1,${Buffer.from(s.slice(3), "base64").toString("hex")}`),
    expected: error("invalid_signature"),
  },
  {
    name: "signature_without_padding",
    description: "the right MAC in base64 without its = padding",
    headers: (i, t, s) => standard(i, t, s.replace(/=+$/, "")),
    expected: error("invalid_signature"),
  },
  {
    name: "service_headers_only",
    description:
      "a request signed under the service scheme (X-Service-Timestamp, X-Service-Signature): not what a standard receiver checks",
    headers: (i, t) => ({ "X-Service-Timestamp": t, "X-Service-Signature": `sha256=${"0".repeat(64)}`, "X-Service-Event-Id": i }),
    expected: error("missing_header"),
  },
  {
    name: "expired",
    description: "sent 301 s before now, with a tolerance of 300 s",
    timestamp: -301,
    expected: error("timestamp_out_of_tolerance"),
  },
  { name: "oldest_accepted", description: "sent exactly 300 s before now: the window is inclusive", timestamp: -300, expected: "ok" },
  { name: "future", description: "sent 301 s after now", timestamp: 301, expected: error("timestamp_out_of_tolerance") },
  { name: "latest_accepted", description: "sent exactly 300 s after now", timestamp: 300, expected: "ok" },
  {
    name: "missing_id_header",
    description: "no webhook-id",
    headers: (_i, t, s) => ({ "webhook-timestamp": t, "webhook-signature": s }),
    expected: error("missing_header"),
  },
  {
    name: "missing_timestamp_header",
    description: "no webhook-timestamp",
    headers: (i, _t, s) => ({ "webhook-id": i, "webhook-signature": s }),
    expected: error("missing_header"),
  },
  {
    name: "missing_signature_header",
    description: "no webhook-signature",
    headers: (i, t) => ({ "webhook-id": i, "webhook-timestamp": t }),
    expected: error("missing_header"),
  },
  {
    name: "empty_signature_header",
    description: "webhook-signature present but empty",
    headers: (i, t) => standard(i, t, ""),
    expected: error("missing_header"),
  },
  {
    name: "timestamp_in_milliseconds",
    description: "13 digits: milliseconds instead of seconds",
    timestamp: `${NOW}000`,
    expected: error("invalid_timestamp"),
  },
  {
    name: "order_timestamp_before_signature",
    description: "expired and signed with a wrong secret: the timestamp is checked first",
    timestamp: -3600,
    signedWith: [STD_OTHER],
    expected: error("timestamp_out_of_tolerance"),
  },
  {
    name: "non_utf8_body",
    description: "bytes that are not UTF-8, signed correctly (as bytes): the signature holds, the body is not a valid payload",
    body: LATIN1,
    expected: error("invalid_payload"),
  },
  {
    name: "payload_not_json",
    description: "a correctly signed body that is not JSON",
    body: Buffer.from("ok", "utf8"),
    expected: error("invalid_payload"),
  },
];

/** The vector of one case. */
function toVector(c: StandardCase): TestVector {
  const secrets = c.secrets ?? [STD_SECRET];
  const body = c.body ?? SENT;
  const id = c.id ?? EVENT_ID;
  const timestamp = typeof c.timestamp === "string" ? c.timestamp : String(NOW + (c.timestamp ?? 0));
  const signature = (c.signedWith ?? [secrets[0]])
    .map((secret) => signStandardVector(secret, c.signedId ?? id, timestamp, c.signedBody ?? body))
    .join(" ");
  const expected: VectorOutcome =
    c.expected === "ok" ? { ok: true, envelope: JSON.parse(body.toString("utf8")) as WebhookEnvelope } : c.expected;
  return {
    name: c.name,
    description: c.description,
    secrets,
    headers: (c.headers ?? standard)(id, timestamp, signature),
    body_base64: body.toString("base64"),
    now: NOW,
    tolerance_seconds: c.tolerance ?? 300,
    expected,
  };
}

/** The specification's example: correctly signed, but its body is no envelope of this service. */
function specExample(): TestVector {
  return {
    name: "specification_example",
    description:
      "the example of the Standard Webhooks specification (its signature v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=): " +
      "the signature holds, the body is not an envelope",
    secrets: [SPEC_SECRET],
    headers: standard(SPEC_ID, SPEC_TIMESTAMP, signStandardVector(SPEC_SECRET, SPEC_ID, SPEC_TIMESTAMP, SPEC_BODY)),
    body_base64: SPEC_BODY.toString("base64"),
    now: Number(SPEC_TIMESTAMP),
    tolerance_seconds: 300,
    expected: error("invalid_payload"),
  };
}

/** The `standard` section of test-vectors.json. */
export function standardVectors(): TestVector[] {
  return [...CASES.map(toVector), specExample()];
}

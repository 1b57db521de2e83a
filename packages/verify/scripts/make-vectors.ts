// Writes packages/verify/test-vectors.json: `npm run vectors -w @mailhooks/verify`.
//
// The signatures come from node:crypto's HMAC directly, never from this library or the
// service's signing package, so the tests that check those against the vectors are not
// checking them against themselves (vector-bodies.ts). Each expected outcome is written out by
// hand (vector-cases.ts).
import { writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import type { WebhookEnvelope } from "../src/core.js";
import type { TestVector, TestVectorFile, VectorOutcome } from "./vectors.js";
import { VECTORS_PATH } from "./vectors.js";
import { canonical, type Case, EVENT_ID, NOW, SECRET, SENT, sign } from "./vector-bodies.js";
import { CASES } from "./vector-cases.js";
import { standardVectors } from "./vector-standard.js";

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
    standard: {
      description:
        "Requests of a webhook whose signature_scheme is standard (Standard Webhooks, https://www.standardwebhooks.com), verified with " +
        "{scheme: 'standard'}. Signed message: webhook-id, '.', webhook-timestamp, '.', then the body's bytes; HMAC-SHA256 keyed with the " +
        "bytes that the secret's standard base64 after 'whsec_' decodes to; webhook-signature holds 'v1,' + the MAC's standard base64, " +
        "one per signing secret, separated by spaces (both secrets sign during a rotation's grace); signatures of other versions are " +
        "skipped. A request passes when any one of `secrets` made any one of the v1 signatures. The event id is webhook-id; the service " +
        "also sends it as X-Service-Event-Id.",
      checks_in_order: [
        "missing_header: webhook-id, webhook-timestamp or webhook-signature absent or empty",
        "invalid_timestamp: webhook-timestamp is not 1 to 12 ASCII digits",
        "timestamp_out_of_tolerance: |now - timestamp| > tolerance_seconds",
        "invalid_signature: no 'v1,' + base64 of 32 bytes among the space-separated signatures, or no secret gives one of them",
        "invalid_payload: the body is not UTF-8 JSON (no BOM) of an object with event (string), timestamp (number), data (object)",
      ],
      vectors: standardVectors(),
    },
  };
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  writeFileSync(VECTORS_PATH, JSON.stringify(buildVectorFile(), null, 2) + "\n");
  console.log(`wrote ${fileURLToPath(VECTORS_PATH)}`);
}

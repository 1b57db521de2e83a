import { signatureHeaders, signPayload } from "@mailhooks/signing";
import { COMMON, NOW } from "../scripts/vector-bodies.js";

/**
 * A request as the service's dispatcher signs it (the real signing code, not this library),
 * for the adapter tests, with X-Service-Event-Id `EVENT_ID`. `timestamp` defaults to now, in
 * Unix seconds.
 */
export function signedRequest(secret: string, envelope: unknown, timestamp = Math.floor(Date.now() / 1000)) {
  const body = JSON.stringify(envelope);
  const headers = {
    "content-type": "application/json",
    "X-Service-Timestamp": String(timestamp),
    "X-Service-Signature": signPayload(secret, String(timestamp), body),
    "X-Service-Event-Id": EVENT_ID,
  };
  return { body, headers };
}

/**
 * The same under the `standard` scheme (Standard Webhooks), signed by the dispatcher's code with
 * every secret of `secrets` (both during a rotation's grace).
 */
export function standardSignedRequest(secrets: string[], envelope: unknown, timestamp = Math.floor(Date.now() / 1000)) {
  const body = JSON.stringify(envelope);
  const signed = signatureHeaders({ scheme: "standard", secrets }, EVENT_ID, timestamp, body);
  return { body, headers: { "content-type": "application/json", "X-Service-Event-Id": EVENT_ID, ...signed } };
}

/** A secret in the form the service makes them: `whsec_` and the standard base64 of 32 bytes. */
export const STANDARD_SECRET = "whsec_Bph43y3bUSBzCJKSxrdLw6AmXs2pGzck3G/eGZJ6Gss=";

/** The same request without X-Service-Event-Id. */
export function withoutEventId(request: ReturnType<typeof signedRequest>) {
  const { "X-Service-Event-Id": _id, ...headers } = request.headers;
  return { body: request.body, headers };
}

export const EVENT_ID = "evt_019a2b3c4d5e7f00a1b2c3d4e5f6aa01";

export const SECRET = "whsec_adapter_test_5d1f";
/** A message.delivered envelope: the test vectors' message and clock (scripts/vector-bodies.ts). */
export const ENVELOPE = {
  event: "message.delivered",
  timestamp: NOW,
  data: { ...COMMON, status: "delivered", deliveredAt: "2026-11-22T10:00:05Z" },
};
/** What the adapters hand over for ENVELOPE sent as EVENT_ID: the event id, then the envelope. */
export const WEBHOOK = { id: EVENT_ID, ...ENVELOPE };

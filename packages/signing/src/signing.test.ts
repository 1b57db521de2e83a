import { readFileSync } from "node:fs";
import { signPayload, verifySignature, SIGNATURE_HEADER, TIMESTAMP_HEADER } from "./index.js";

// Fixed vectors, computed once outside this code with OpenSSL (the shell's locale is UTF-8, so
// non-ASCII text and secrets go in as UTF-8 bytes):
//   printf '%s' '1700000000.{"event":"message.sent"}' | openssl dgst -sha256 -hmac 'whsec_test'
//   printf '%s' '1700000000.{"subject":"café 🎉"}'    | openssl dgst -sha256 -hmac 'whsec_test'
//   printf '%s' '1700000000.{"event":"message.sent"}' | openssl dgst -sha256 -hmac 'clé_secrète'
const SECRET = "whsec_test";
const TIMESTAMP = "1700000000";
const BODY = '{"event":"message.sent"}';
const BODY_HEX = "56ff83ac3112c85c6edc2c5f0fb3066a107610e8131b211e908a1078e7be5973";
const UNICODE_BODY = '{"subject":"café 🎉"}';
const UNICODE_BODY_HEX = "03972f3b4ab8a142833308af970c81cff7d7ffd3892432d1e36bed30bb84531c";
const UNICODE_SECRET = "clé_secrète";
const UNICODE_SECRET_HEX = "260e6ed3b14ac3e16d7cf52710100b9ea2b449f1bedecad25d36b52312b619e7";

const GOOD_SIGNATURE = `sha256=${BODY_HEX}`;

/** A verification input that passes; each rejection test changes exactly one thing. */
function valid(overrides: Partial<Parameters<typeof verifySignature>[0]> = {}) {
  return { secret: SECRET, timestamp: TIMESTAMP, signature: GOOD_SIGNATURE, body: BODY, ...overrides };
}

describe("signPayload", () => {
  it("uses the spec's header names", () => {
    expect(SIGNATURE_HEADER).toBe("X-Service-Signature");
    expect(TIMESTAMP_HEADER).toBe("X-Service-Timestamp");
  });

  it("matches the OpenSSL vector for `<timestamp>.<body>`", () => {
    expect(signPayload(SECRET, TIMESTAMP, BODY)).toBe(GOOD_SIGNATURE);
  });

  it("gives the same signature for a numeric timestamp and for a Buffer body", () => {
    expect(signPayload(SECRET, 1700000000, BODY)).toBe(GOOD_SIGNATURE);
    expect(signPayload(SECRET, TIMESTAMP, Buffer.from(BODY, "utf8"))).toBe(GOOD_SIGNATURE);
  });

  it("signs the UTF-8 bytes of a non-ASCII body", () => {
    expect(signPayload(SECRET, TIMESTAMP, UNICODE_BODY)).toBe(`sha256=${UNICODE_BODY_HEX}`);
    expect(signPayload(SECRET, TIMESTAMP, Buffer.from(UNICODE_BODY, "utf8"))).toBe(`sha256=${UNICODE_BODY_HEX}`);
  });

  it("keys the HMAC with the secret's UTF-8 bytes", () => {
    expect(signPayload(UNICODE_SECRET, TIMESTAMP, BODY)).toBe(`sha256=${UNICODE_SECRET_HEX}`);
  });

  it("emits `sha256=` and 64 lowercase hex digits", () => {
    expect(signPayload("another secret", "1", "x")).toMatch(/^sha256=[0-9a-f]{64}$/);
  });
});

describe("verifySignature", () => {
  it("accepts the right secret, timestamp, body and signature", () => {
    expect(verifySignature(valid())).toBe(true);
    expect(verifySignature(valid({ body: Buffer.from(BODY, "utf8") }))).toBe(true);
    expect(verifySignature(valid({ body: UNICODE_BODY, signature: `sha256=${UNICODE_BODY_HEX}` }))).toBe(true);
  });

  it("rejects a body with one byte changed", () => {
    expect(verifySignature(valid({ body: BODY.replace("sent", "sEnt") }))).toBe(false);
    // Re-serializing with whitespace changes the bytes, so it must fail too.
    expect(verifySignature(valid({ body: '{"event": "message.sent"}' }))).toBe(false);
  });

  it("rejects a changed timestamp", () => {
    expect(verifySignature(valid({ timestamp: "1700000001" }))).toBe(false);
  });

  it("rejects a wrong secret", () => {
    expect(verifySignature(valid({ secret: "whsec_other" }))).toBe(false);
  });

  it("rejects a missing or malformed header", () => {
    expect(verifySignature(valid({ signature: undefined }))).toBe(false);
    expect(verifySignature(valid({ signature: "" }))).toBe(false);
    expect(verifySignature(valid({ signature: BODY_HEX }))).toBe(false); // no `sha256=` prefix
    expect(verifySignature(valid({ signature: `sha1=${BODY_HEX}` }))).toBe(false);
    expect(verifySignature(valid({ signature: `${GOOD_SIGNATURE}00` }))).toBe(false);
    expect(verifySignature(valid({ signature: GOOD_SIGNATURE.slice(0, -2) }))).toBe(false);
    expect(verifySignature(valid({ timestamp: undefined }))).toBe(false);
    expect(verifySignature(valid({ timestamp: "" }))).toBe(false);
    expect(verifySignature(valid({ timestamp: "17e8" }))).toBe(false);
  });

  it("rejects uppercase hex (the spec says lowercase)", () => {
    expect(verifySignature(valid({ signature: `sha256=${BODY_HEX.toUpperCase()}` }))).toBe(false);
  });

  it("enforces toleranceSeconds around `now` in both directions", () => {
    const ts = Number(TIMESTAMP);
    expect(verifySignature(valid({ toleranceSeconds: 300, now: ts + 300 }))).toBe(true);
    expect(verifySignature(valid({ toleranceSeconds: 300, now: ts - 300 }))).toBe(true);
    expect(verifySignature(valid({ toleranceSeconds: 300, now: ts + 301 }))).toBe(false);
    expect(verifySignature(valid({ toleranceSeconds: 300, now: ts - 301 }))).toBe(false);
  });

  it("checks the tolerance against the current time when `now` is not given", () => {
    // TIMESTAMP is from 2023; with a one-day window it is far outside.
    expect(verifySignature(valid({ toleranceSeconds: 86_400 }))).toBe(false);
    const fresh = String(Math.floor(Date.now() / 1000));
    const signature = signPayload(SECRET, fresh, BODY);
    expect(verifySignature(valid({ timestamp: fresh, signature, toleranceSeconds: 60 }))).toBe(true);
  });
});

// The receivers' test vectors (packages/verify/test-vectors.json, made with a bare HMAC): what
// the service signs must be what every receiver library checks.
interface Vector {
  name: string;
  secrets: string[];
  headers: Record<string, string>;
  body_base64: string;
  now: number;
  tolerance_seconds: number;
  expected: { ok: true } | { ok: false; error: string };
}
const vectors = (JSON.parse(readFileSync(new URL("../../verify/test-vectors.json", import.meta.url), "utf8")) as { vectors: Vector[] }).vectors;
const header = (v: Vector, name: string) => Object.entries(v.headers).find(([k]) => k.toLowerCase() === name.toLowerCase())?.[1];
// invalid_payload is refused after the signature matched: the body was signed correctly.
const correctlySigned = (v: Vector) => v.expected.ok || v.expected.error === "invalid_payload";

describe("the receivers' test vectors", () => {
  it("has correctly signed vectors to reproduce", () => {
    expect(vectors.filter(correctlySigned).length).toBeGreaterThanOrEqual(10);
  });

  it.each(vectors.filter(correctlySigned).map((v) => [v.name, v] as const))("signPayload reproduces the signature of %s", (_name, v) => {
    const body = Buffer.from(v.body_base64, "base64");
    const timestamp = header(v, TIMESTAMP_HEADER)!;
    const signatures = v.secrets.map((secret) => signPayload(secret, timestamp, body));
    expect(signatures).toContain(header(v, SIGNATURE_HEADER));
  });

  it.each(vectors.map((v) => [v.name, v] as const))("verifySignature agrees with %s", (_name, v) => {
    const body = Buffer.from(v.body_base64, "base64");
    const verified = v.secrets.some((secret) =>
      verifySignature({ secret, timestamp: header(v, TIMESTAMP_HEADER), signature: header(v, SIGNATURE_HEADER), body, toleranceSeconds: v.tolerance_seconds, now: v.now }),
    );
    expect(verified).toBe(correctlySigned(v));
  });
});

import { readFileSync } from "node:fs";
import { Webhook } from "standardwebhooks";
import {
  EVENT_ID_HEADER,
  isStandardSecret,
  signatureHeaders,
  signPayload,
  signStandard,
  SIGNATURE_HEADER,
  standardSecretKey,
  TIMESTAMP_HEADER,
} from "./index.js";

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

describe("signPayload", () => {
  it("uses the spec's header names", () => {
    expect(SIGNATURE_HEADER).toBe("X-Service-Signature");
    expect(TIMESTAMP_HEADER).toBe("X-Service-Timestamp");
    expect(EVENT_ID_HEADER).toBe("X-Service-Event-Id");
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
const vectors = (JSON.parse(readFileSync(new URL("../../verify/test-vectors.json", import.meta.url), "utf8")) as { vectors: Vector[] })
  .vectors;
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
});

// The Standard Webhooks specification's own example, computed once outside this code with OpenSSL:
//   key=$(printf '%s' MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw | base64 -d | xxd -p -c 100)
//   printf '%s' 'msg_p5jXN8AQM9LWM0D4loKWxJek.1614265330.{"test": 2432232314}' \
//     | openssl dgst -sha256 -mac HMAC -macopt hexkey:$key -binary | base64
const STANDARD_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const STANDARD_ID = "msg_p5jXN8AQM9LWM0D4loKWxJek";
const STANDARD_TIMESTAMP = 1614265330;
const STANDARD_BODY = '{"test": 2432232314}';
const STANDARD_SIGNATURE = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";

describe("standard secrets", () => {
  it("are whsec_ and canonical standard base64", () => {
    expect(standardSecretKey(STANDARD_SECRET)).toEqual(Buffer.from("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "base64"));
    expect(isStandardSecret(`whsec_${Buffer.alloc(32, 0xfb).toString("base64")}`)).toBe(true);
  });

  it.each([
    ["no prefix", "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"],
    ["nothing after the prefix", "whsec_"],
    // The secrets made before the rule: 32 bytes of base64url, no padding.
    ["the URL-safe alphabet", `whsec_${Buffer.alloc(32, 0xfb).toString("base64url")}`],
    ["no padding", `whsec_${Buffer.alloc(32, 7).toString("base64").replace(/=+$/, "")}`],
    ["a character outside base64", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaS!"],
    ["whitespace", "whsec_MfKQ9r8GKYqrTwjU PD8ILPZIo2LaLaSw"],
    ["non-zero bits after the last byte (not canonical)", "whsec_YWJ="],
  ])("are not: %s", (_what, secret) => {
    expect(standardSecretKey(secret)).toBeNull();
    expect(isStandardSecret(secret)).toBe(false);
  });
});

describe("signStandard", () => {
  it("matches the specification's example (OpenSSL)", () => {
    expect(signStandard([STANDARD_SECRET], STANDARD_ID, STANDARD_TIMESTAMP, STANDARD_BODY)).toBe(STANDARD_SIGNATURE);
    expect(signStandard([STANDARD_SECRET], STANDARD_ID, String(STANDARD_TIMESTAMP), Buffer.from(STANDARD_BODY))).toBe(STANDARD_SIGNATURE);
  });

  it("signs with every standard secret, in order, space-separated, and leaves out one that is not", () => {
    const other = `whsec_${Buffer.alloc(24, 1).toString("base64")}`;
    const legacy = `whsec_${Buffer.alloc(32, 0xfb).toString("base64url")}`;
    const both = signStandard([other, STANDARD_SECRET], STANDARD_ID, STANDARD_TIMESTAMP, STANDARD_BODY);
    expect(both.split(" ")).toEqual([signStandard([other], STANDARD_ID, STANDARD_TIMESTAMP, STANDARD_BODY), STANDARD_SIGNATURE]);
    expect(signStandard([legacy, STANDARD_SECRET], STANDARD_ID, STANDARD_TIMESTAMP, STANDARD_BODY)).toBe(STANDARD_SIGNATURE);
    expect(() => signStandard([legacy], STANDARD_ID, STANDARD_TIMESTAMP, STANDARD_BODY)).toThrow(/standard secret/);
  });

  it("is verified by the official standardwebhooks library with either secret of a pair", () => {
    const other = `whsec_${Buffer.alloc(64, 9).toString("base64")}`;
    const body = '{"event":"message.sent","timestamp":1795341600,"data":{"subject":"Grüße 🎉"}}';
    const now = Math.floor(Date.now() / 1000);
    const headers = signatureHeaders({ scheme: "standard", secrets: [other, STANDARD_SECRET] }, "evt_1", now, body);
    expect(Object.keys(headers)).toEqual(["webhook-id", "webhook-timestamp", "webhook-signature"]);
    for (const secret of [other, STANDARD_SECRET]) expect(new Webhook(secret).verify(body, headers)).toEqual(JSON.parse(body));
    expect(() => new Webhook(`whsec_${Buffer.alloc(32, 3).toString("base64")}`).verify(body, headers)).toThrow(/signature/);
  });
});

describe("signatureHeaders", () => {
  it("under service: X-Service-Timestamp and X-Service-Signature", () => {
    expect(signatureHeaders({ scheme: "service", secret: SECRET }, "evt_1", TIMESTAMP, BODY)).toEqual({
      [TIMESTAMP_HEADER]: TIMESTAMP,
      [SIGNATURE_HEADER]: GOOD_SIGNATURE,
    });
  });

  it("under standard: webhook-id (the event id), webhook-timestamp, webhook-signature", () => {
    expect(signatureHeaders({ scheme: "standard", secrets: [STANDARD_SECRET] }, STANDARD_ID, STANDARD_TIMESTAMP, STANDARD_BODY)).toEqual({
      "webhook-id": STANDARD_ID,
      "webhook-timestamp": String(STANDARD_TIMESTAMP),
      "webhook-signature": STANDARD_SIGNATURE,
    });
  });
});

import { createHmac } from "node:crypto";
import { readFileSync } from "node:fs";
import {
  verify,
  verifyEvent,
  WebhookVerificationError,
  isWebhookVerificationError,
  EVENT_ID_HEADER,
  type HeadersInput,
  type RawBody,
  type VerifyOptions,
} from "./index.js";
import * as web from "./web.js";
import { jest } from "@jest/globals";
import { Webhook } from "standardwebhooks";
import { bodyOf, loadStandardVectors, loadVectors, VECTORS_PATH, type TestVector, type VectorOutcome } from "../scripts/vectors.js";
import { buildVectorFile } from "../scripts/make-vectors.js";

const vectors = loadVectors();

/** Runs one verification and reduces it to a vector outcome; anything but a verification error fails the test. */
async function outcome(run: () => unknown): Promise<VectorOutcome> {
  try {
    return { ok: true, envelope: (await run()) as Extract<VectorOutcome, { ok: true }>["envelope"] };
  } catch (error) {
    if (isWebhookVerificationError(error)) return { ok: false, error: error.code };
    throw error;
  }
}

const lowercased = (headers: Record<string, string>) => Object.fromEntries(Object.entries(headers).map(([k, v]) => [k.toLowerCase(), v]));

/** The same request in each shape a receiver may hold it in. */
function shapesOf(vector: TestVector): Array<{ headers: HeadersInput; body: RawBody; shape: string }> {
  const bytes = bodyOf(vector);
  const arrayBuffer = bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer;
  return [
    { shape: "record + Buffer", headers: vector.headers, body: bytes },
    { shape: "fetch Headers + ArrayBuffer", headers: new Headers(vector.headers), body: arrayBuffer },
    { shape: "Node's lowercase headers + Uint8Array", headers: lowercased(vector.headers), body: new Uint8Array(arrayBuffer) },
  ];
}

const optionsOf = (vector: TestVector): VerifyOptions => ({ now: vector.now, toleranceSeconds: vector.tolerance_seconds });

describe("test-vectors.json", () => {
  it("is what scripts/make-vectors.ts writes (regenerate with `npm run vectors -w @mailhooks/verify`)", () => {
    expect(JSON.parse(readFileSync(VECTORS_PATH, "utf8"))).toEqual(JSON.parse(JSON.stringify(buildVectorFile())));
  });

  it("covers every error code and the cases the receivers get wrong", () => {
    const codes = new Set(vectors.map((v) => (v.expected.ok ? "ok" : v.expected.error)));
    expect([...codes].sort()).toEqual([
      "invalid_payload",
      "invalid_signature",
      "invalid_timestamp",
      "missing_header",
      "ok",
      "timestamp_out_of_tolerance",
    ]);
    for (const name of [
      "valid",
      "tampered_body",
      "wrong_secret",
      "expired",
      "future",
      "uppercase_hex",
      "non_utf8_body",
      "valid_crlf_bytes_between_tokens",
      "rotation_signed_with_old",
    ]) {
      expect(vectors.map((v) => v.name)).toContain(name);
    }
  });
});

describe.each([
  ["node:crypto", (s: string[], h: HeadersInput, b: RawBody, o: VerifyOptions) => verify(s, h, b, o)],
  ["Web Crypto", (s: string[], h: HeadersInput, b: RawBody, o: VerifyOptions) => web.verify(s, h, b, o)],
] as const)("verify on %s", (_variant, run) => {
  it.each(vectors.map((v) => [v.name, v] as const))("vector %s", async (_name, vector) => {
    for (const { headers, body, shape } of shapesOf(vector)) {
      const got = await outcome(() => run(vector.secrets, headers, body, optionsOf(vector)));
      expect({ shape, ...got }).toEqual({ shape, ...vector.expected });
    }
  });

  it("takes a single secret as a string, and a string body as UTF-8", async () => {
    const vector = vectors.find((v) => v.name === "valid_non_ascii_utf8_body")!;
    const envelope = await run([vector.secrets[0]], vector.headers, bodyOf(vector).toString("utf8"), optionsOf(vector));
    expect(envelope).toEqual((vector.expected as { envelope: unknown }).envelope);
  });
});

/** The vector's X-Service-Event-Id, whatever the case of its name. */
const eventIdOf = (vector: TestVector) => Object.entries(vector.headers).find(([name]) => name.toLowerCase() === "x-service-event-id")?.[1];

describe.each([
  ["node:crypto", (s: string[], h: HeadersInput, b: RawBody, o: VerifyOptions) => verifyEvent(s, h, b, o)],
  ["Web Crypto", (s: string[], h: HeadersInput, b: RawBody, o: VerifyOptions) => web.verifyEvent(s, h, b, o)],
] as const)("verifyEvent on %s", (_variant, run) => {
  it.each(vectors.map((v) => [v.name, v] as const))(
    "vector %s: the vector's outcome, with X-Service-Event-Id as `id`",
    async (_name, vector) => {
      for (const { headers, body, shape } of shapesOf(vector)) {
        let got: unknown;
        try {
          const { id, ...envelope } = await run(vector.secrets, headers, body, optionsOf(vector));
          got = { ok: true, envelope, id };
        } catch (error) {
          if (!isWebhookVerificationError(error)) throw error;
          got = { ok: false, error: error.code };
        }
        expect({ shape, got }).toEqual({
          shape,
          got: vector.expected.ok ? { ...vector.expected, id: eventIdOf(vector) } : vector.expected,
        });
      }
    },
  );

  it("refuses a request without X-Service-Event-Id (absent or empty) with missing_header, before any other check", async () => {
    const valid = vectors.find((v) => v.name === "valid")!;
    const expired = vectors.find((v) => v.name === "expired")!;
    for (const vector of [valid, expired]) {
      const headers = Object.fromEntries(Object.entries(vector.headers).filter(([name]) => name !== EVENT_ID_HEADER));
      for (const without of [headers, { ...headers, [EVENT_ID_HEADER]: "" }]) {
        await expect(Promise.resolve().then(() => run(vector.secrets, without, bodyOf(vector), optionsOf(vector)))).rejects.toMatchObject({
          code: "missing_header",
          message: expect.stringContaining(EVENT_ID_HEADER),
        });
      }
    }
    // verify itself does not need it.
    expect(verify(valid.secrets, headers(valid), bodyOf(valid), optionsOf(valid))).toEqual(
      (valid.expected as { envelope: unknown }).envelope,
    );
    function headers(vector: TestVector) {
      return Object.fromEntries(Object.entries(vector.headers).filter(([name]) => name !== EVENT_ID_HEADER));
    }
  });
});

describe("verify's arguments", () => {
  const vector = vectors.find((v) => v.name === "valid")!;
  const body = bodyOf(vector);
  const options = optionsOf(vector);

  it("refuses a body that was already parsed, saying that the raw bytes are needed", async () => {
    const parsed = JSON.parse(body.toString("utf8"));
    expect(() => verify(vector.secrets[0], vector.headers, parsed, options)).toThrow(TypeError);
    expect(() => verify(vector.secrets[0], vector.headers, parsed, options)).toThrow(/raw request body.*express\.raw/s);
    await expect(web.verify(vector.secrets[0], vector.headers, parsed, options)).rejects.toThrow(TypeError);
    expect(() => verify(vector.secrets[0], vector.headers, undefined as unknown as string, options)).toThrow(/got undefined/);
  });

  it("refuses a missing or empty secret with a TypeError", () => {
    for (const secret of ["", [], [""], undefined]) {
      expect(() => verify(secret as string, vector.headers, body, options)).toThrow(TypeError);
    }
  });

  it("refuses a negative or non-numeric tolerance, and a `now` that is not a time", () => {
    expect(() => verify(vector.secrets, vector.headers, body, { ...options, toleranceSeconds: -1 })).toThrow(TypeError);
    expect(() => verify(vector.secrets, vector.headers, body, { ...options, toleranceSeconds: "300" as unknown as number })).toThrow(
      TypeError,
    );
    expect(() => verify(vector.secrets, vector.headers, body, { now: Number.NaN })).toThrow(TypeError);
  });

  it("uses the current time by default, and accepts `now` as a Date", () => {
    // The vector was sent on 2026-11-22 at 10:00 UTC: by default it is judged against the real clock.
    const real = Math.floor(Date.now() / 1000);
    expect(() => verify(vector.secrets, vector.headers, body)).toThrow(expect.objectContaining({ code: "timestamp_out_of_tolerance" }));
    const fresh = String(real);
    const signature = "sha256=" + createHmac("sha256", vector.secrets[0]).update(`${fresh}.`).update(body).digest("hex");
    expect(verify(vector.secrets, { "X-Service-Timestamp": fresh, "X-Service-Signature": signature }, body).event).toBe("message.sent");
    expect(verify(vector.secrets, vector.headers, body, { now: new Date(vector.now * 1000 + 999) }).event).toBe("message.sent");
  });

  it("turns the window off with toleranceSeconds: Infinity", () => {
    expect(verify(vector.secrets, vector.headers, body, { now: vector.now + 10 * 365 * 86400, toleranceSeconds: Infinity }).event).toBe(
      "message.sent",
    );
  });

  it("joins a header given as an array, as Node does with repeated headers, which then fails the format", () => {
    const signature = vector.headers["X-Service-Signature"];
    expect(
      verify(
        vector.secrets,
        { "x-service-timestamp": [vector.headers["X-Service-Timestamp"]], "x-service-signature": [signature] },
        body,
        options,
      ).event,
    ).toBe("message.sent");
    expect(() =>
      verify(
        vector.secrets,
        { "x-service-timestamp": vector.headers["X-Service-Timestamp"], "x-service-signature": [signature, signature] },
        body,
        options,
      ),
    ).toThrow(expect.objectContaining({ code: "invalid_signature" }));
  });
});

describe("WebhookVerificationError", () => {
  it("carries a code and a message, and is one class for both variants", async () => {
    const vector = vectors.find((v) => v.name === "wrong_secret")!;
    let thrown: unknown;
    try {
      verify(vector.secrets, vector.headers, bodyOf(vector), optionsOf(vector));
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(WebhookVerificationError);
    expect(thrown).toBeInstanceOf(web.WebhookVerificationError);
    expect(thrown).toMatchObject({
      name: "WebhookVerificationError",
      code: "invalid_signature",
      message: expect.stringContaining("X-Service-Signature"),
    });
    await expect(web.verify(vector.secrets, vector.headers, bodyOf(vector), optionsOf(vector))).rejects.toBeInstanceOf(
      WebhookVerificationError,
    );
  });

  it("is recognised by isWebhookVerificationError without instanceof (ESM and CJS copies)", () => {
    const lookalike = Object.assign(new Error("x"), { name: "WebhookVerificationError", code: "missing_header" });
    expect(isWebhookVerificationError(lookalike)).toBe(true);
    expect(isWebhookVerificationError(Object.assign(new Error("x"), { name: "WebhookVerificationError", code: "other" }))).toBe(false);
    expect(isWebhookVerificationError(new TypeError("x"))).toBe(false);
  });
});

describe("the standard scheme (Standard Webhooks)", () => {
  const standardVectors = loadStandardVectors();
  const standardOptions = (vector: TestVector): VerifyOptions => ({ ...optionsOf(vector), scheme: "standard" });
  /** webhook-id, whatever the case of its name. */
  const webhookIdOf = (vector: TestVector) => Object.entries(vector.headers).find(([name]) => name.toLowerCase() === "webhook-id")?.[1];

  it("has vectors for every error code, rotation and the specification's example", () => {
    const codes = new Set(standardVectors.map((v) => (v.expected.ok ? "ok" : v.expected.error)));
    expect([...codes].sort()).toEqual([
      "invalid_payload",
      "invalid_signature",
      "invalid_timestamp",
      "missing_header",
      "ok",
      "timestamp_out_of_tolerance",
    ]);
    for (const name of ["valid", "rotation_both_sign_receiver_holds_old", "rotation_both_sign_receiver_holds_new", "specification_example"])
      expect(standardVectors.map((v) => v.name)).toContain(name);
  });

  describe.each([
    ["node:crypto", verify, verifyEvent],
    ["Web Crypto", web.verify, web.verifyEvent],
  ] as const)("on %s", (_variant, runVerify, runVerifyEvent) => {
    it.each(standardVectors.map((v) => [v.name, v] as const))(
      "vector %s: verify and verifyEvent (id: webhook-id)",
      async (_name, vector) => {
        for (const { headers, body, shape } of shapesOf(vector)) {
          const got = await outcome(() => runVerify(vector.secrets, headers, body, standardOptions(vector)));
          expect({ shape, ...got }).toEqual({ shape, ...vector.expected });
          let event: unknown;
          try {
            const { id, ...envelope } = await runVerifyEvent(vector.secrets, headers, body, standardOptions(vector));
            event = { ok: true, envelope, id };
          } catch (error) {
            if (!isWebhookVerificationError(error)) throw error;
            event = { ok: false, error: error.code };
          }
          expect({ shape, event }).toEqual({
            shape,
            event: vector.expected.ok ? { ...vector.expected, id: webhookIdOf(vector) } : vector.expected,
          });
        }
      },
    );

    it("refuses the service scheme's requests, and the service scheme refuses the standard one's", async () => {
      const serviceVector = vectors.find((v) => v.name === "valid")!;
      const standardVector = standardVectors.find((v) => v.name === "valid")!;
      await expect(
        Promise.resolve().then(() =>
          runVerify(standardVector.secrets, serviceVector.headers, bodyOf(serviceVector), standardOptions(standardVector)),
        ),
      ).rejects.toMatchObject({ code: "missing_header", message: expect.stringContaining("webhook-") });
      await expect(
        Promise.resolve().then(() =>
          runVerify(standardVector.secrets, standardVector.headers, bodyOf(standardVector), optionsOf(standardVector)),
        ),
      ).rejects.toMatchObject({ code: "missing_header", message: expect.stringContaining("X-Service-") });
    });

    it("throws a TypeError for a secret that is not standard base64 (URL-safe alphabet, padding missing) and for an unknown scheme", async () => {
      const vector = standardVectors.find((v) => v.name === "valid")!;
      const urlSafe = `whsec_${Buffer.alloc(32, 0xfb).toString("base64url")}`;
      for (const secret of [urlSafe, vector.secrets[0].replace(/=+$/, ""), "whsec_"]) {
        await expect(
          Promise.resolve().then(() => runVerify([secret], vector.headers, bodyOf(vector), standardOptions(vector))),
        ).rejects.toThrow(TypeError);
      }
      await expect(
        Promise.resolve().then(() =>
          runVerify(vector.secrets, vector.headers, bodyOf(vector), { ...optionsOf(vector), scheme: "svix" as unknown as "standard" }),
        ),
      ).rejects.toThrow(TypeError);
    });
  });

  /**
   * The official library (npm standardwebhooks) on the same vectors, with each secret the vector
   * holds: it accepts every request whose outcome is `ok` or `invalid_payload` (a signature that
   * holds) and refuses the others, but for the one where it reads the body otherwise.
   */
  describe("the official standardwebhooks library agrees", () => {
    const differs: Record<string, string> = {
      // It decodes the body as UTF-8 before signing (invalid bytes become U+FFFD): other bytes.
      non_utf8_body: "refused",
    };
    afterEach(() => jest.restoreAllMocks());

    const officially = (secret: string, vector: TestVector): "accepted" | "refused" => {
      try {
        new Webhook(secret).verify(bodyOf(vector).toString("utf8"), vector.headers);
        return "accepted";
      } catch (error) {
        // A body that is not JSON reaches JSON.parse once the signature held.
        return error instanceof SyntaxError ? "accepted" : "refused";
      }
    };

    it.each(standardVectors.map((v) => [v.name, v] as const))("vector %s", (_name, vector) => {
      jest.spyOn(Date, "now").mockReturnValue(vector.now * 1000);
      const official = vector.secrets.some((secret) => officially(secret, vector) === "accepted") ? "accepted" : "refused";
      const ours = vector.expected.ok || vector.expected.error === "invalid_payload" ? "accepted" : "refused";
      expect({ name: vector.name, official }).toEqual({ name: vector.name, official: differs[vector.name] ?? ours });
    });
  });
});

import Fastify, { type FastifyInstance } from "fastify";
import { verifyWebhook } from "./fastify.js";
import { ENVELOPE, SECRET, signedRequest, WEBHOOK, withoutEventId } from "../test/signed.js";

let app: FastifyInstance;
let base: string;
const handled: unknown[] = [];

/** A real HTTP request: Fastify's inject() needs an ESM-only dependency that jest cannot load. */
async function send(options: { method: string; url: string; headers: Record<string, string>; payload?: string | Buffer }) {
  const res = await fetch(base + options.url, { method: options.method, headers: options.headers, body: options.payload });
  const text = await res.text();
  return { statusCode: res.status, json: () => JSON.parse(text) };
}

beforeAll(async () => {
  app = Fastify();
  // The webhook routes live in their own scope, with the plugin; the rest of the app is untouched.
  await app.register(async (hooks) => {
    await hooks.register(verifyWebhook, { secret: [SECRET, "whsec_next"], bodyLimit: 64 * 1024 });
    hooks.post("/webhooks", { schema: { body: { type: "object", required: ["event", "timestamp", "data"] } } }, async (request) => {
      const { webhook } = request as typeof request & { webhook: unknown };
      handled.push(webhook);
      return { webhook, body: request.body };
    });
  });
  app.post("/other", async (request) => ({ parsed: request.body }));
  base = await app.listen({ port: 0, host: "127.0.0.1" });
});

afterAll(() => app.close());

describe("@mailhooks/verify/fastify", () => {
  it("verifies, and sets request.webhook to the event id and envelope, request.body to the envelope (route schemas see it)", async () => {
    const { body, headers } = signedRequest(SECRET, ENVELOPE);
    const res = await send({ method: "POST", url: "/webhooks", headers, payload: body });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ webhook: WEBHOOK, body: ENVELOPE });
  });

  it("accepts the second secret (rotation)", async () => {
    const { body, headers } = signedRequest("whsec_next", ENVELOPE);
    expect((await send({ method: "POST", url: "/webhooks", headers, payload: body })).statusCode).toBe(200);
  });

  it("answers 401 with a JSON error and never calls the route", async () => {
    handled.length = 0;
    const { body, headers } = signedRequest(SECRET, ENVELOPE);
    const tampered = await send({ method: "POST", url: "/webhooks", headers, payload: body.replace("delivered", "bounced") });
    expect(tampered.statusCode).toBe(401);
    expect(tampered.json()).toEqual({ error: { code: "invalid_signature", message: expect.any(String) } });
    const bare = await send({ method: "POST", url: "/webhooks", headers: { "content-type": "application/json" }, payload: body });
    expect(bare.json().error.code).toBe("missing_header");
    const unkeyed = withoutEventId(signedRequest(SECRET, ENVELOPE));
    expect((await send({ method: "POST", url: "/webhooks", headers: unkeyed.headers, payload: unkeyed.body })).json().error.code).toBe(
      "missing_header",
    );
    expect(handled).toEqual([]);
  });

  it("checks the exact bytes: a correctly signed body that is not UTF-8 is invalid_payload, not a signature error", async () => {
    const bytes = Buffer.concat([
      Buffer.from('{"event":"message.sent","timestamp":1,"data":{"subject":"Caf'),
      Buffer.from([0xe9]),
      Buffer.from('"}}'),
    ]);
    const timestamp = String(Math.floor(Date.now() / 1000));
    const { signPayload } = await import("@mailhooks/signing");
    const res = await send({
      method: "POST",
      url: "/webhooks",
      headers: {
        "content-type": "application/json",
        "x-service-timestamp": timestamp,
        "x-service-signature": signPayload(SECRET, timestamp, bytes),
        "x-service-event-id": WEBHOOK.id,
      },
      payload: bytes,
    });
    expect(res.statusCode).toBe(401);
    expect(res.json().error.code).toBe("invalid_payload");
  });

  it("refuses a body over bodyLimit with Fastify's 413", async () => {
    const { body, headers } = signedRequest(SECRET, { ...ENVELOPE, data: { ...ENVELOPE.data, body: "x".repeat(70 * 1024) } });
    expect((await send({ method: "POST", url: "/webhooks", headers, payload: body })).statusCode).toBe(413);
  });

  it("leaves routes outside its scope alone: their JSON is parsed as usual", async () => {
    const res = await send({ method: "POST", url: "/other", headers: { "content-type": "application/json" }, payload: '{"a":1}' });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ parsed: { a: 1 } });
  });
});
